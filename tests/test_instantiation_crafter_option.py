"""``instantiation.train.adaptive_virtual_clip``: Crafter 3's virtual step clipped (default) or the paper's
unclipped one (Nasr et al. 2021 Crafter 3), from the params through the registry to the crafter."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.config import ParamsError, load_params
from dpaudit.experiments.instantiation.config import TrainParams, config_from_params


class _StopError(Exception):
    """Raised by a stand-in to end a call once its arguments are captured."""


@pytest.fixture(scope="module")
def game():
    from dpaudit.experiments.instantiation.design.game import Game
    from dpaudit.training.models import mlp

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    return Game(model=mlp("toy", 5, 2, [8]), X_d=X[:60], y_d=y[:60], X_pool=X[60:150], y_pool=y[60:150],
                X_eval=X[150:], y_eval=y[150:], lo=X.min(axis=0), hi=X.max(axis=0), sampling_rate=0.5,
                steps=6, clip_norm=1.0, learning_rate=0.5)  # fmt: skip


def test_default_clips_and_params_yaml_keeps_it() -> None:
    assert TrainParams().adaptive_virtual_clip is True
    params = load_params("params.yaml")
    assert config_from_params(params).train.adaptive_virtual_clip is True


def test_non_boolean_is_refused_by_its_key() -> None:
    params = load_params("params.yaml")
    params["instantiation"]["train"]["adaptive_virtual_clip"] = "no"
    with pytest.raises(ParamsError, match="adaptive_virtual_clip"):
        config_from_params(params)
    with pytest.raises(ParamsError, match="adaptive_virtual_clip"):
        TrainParams(adaptive_virtual_clip="no")  # type: ignore[arg-type]


@pytest.mark.parametrize(("clip", "start"), [(True, "query"), (False, "zero")])
def test_registry_hands_the_option_to_the_crafter(game, monkeypatch, clip: bool, start: str) -> None:
    from dpaudit.experiments.instantiation.design.crafters import poison
    from dpaudit.experiments.instantiation.design.registry import REGISTRY, Play

    seen: dict = {}

    def injector(*args, **kwargs):
        seen.update(start=args[-1], clip_norm=kwargs["clip_norm"])
        raise _StopError

    monkeypatch.setattr(poison, "adaptive_poison_injector", injector)
    tp = TrainParams(trials_per_world=10, adaptive_virtual_clip=clip, adaptive_start=start)
    with pytest.raises(_StopError):
        REGISTRY["D"].play(Play(game, 1.0, 0, tp, (game.X_pool[0], int(game.y_pool[0]))))
    assert seen == {"start": start, "clip_norm": game.clip_norm if clip else None}


def test_unclipped_step_is_the_clipped_one_with_an_inactive_clip(game) -> None:
    """clip_norm=None (the paper's step) crafts the same x as a clip no gradient reaches, and a
    different x from a clip that binds (C = 10⁻³ shrinks the virtual step 10³-fold or more)."""
    import tensorflow as tf

    from dpaudit.experiments.instantiation.design.crafters.poison import craft_adaptive_input

    params = [tf.constant(p) for p in game.model.init(3, seed=5)]
    params = [p + 0.1 if p.shape.rank == 2 else p for p in params]  # biases off 0: ReLUs pass gradients
    xq, yq = tf.constant(game.X_pool[:1]), int(game.y_pool[0])

    def craft(clip: float | None) -> np.ndarray:
        return craft_adaptive_input(game.model, params, xq, yq, game.lo, game.hi, 3, 0.5, 5.0, "zero",
                                    clip_norm=clip).numpy()  # fmt: skip

    unclipped = craft(None)
    np.testing.assert_allclose(unclipped, craft(1e9), atol=1e-6)
    assert not np.allclose(unclipped, craft(1e-3), atol=1e-4)
