"""The Keras-native one-run auditor: the README example, and the gradient-canary hook's arithmetic."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tfp_opt = pytest.importorskip("tensorflow_privacy")

from dpaudit.bounds.onerun import ASSUMPTIONS  # noqa: E402
from dpaudit.training_audit import TrainingAuditor  # noqa: E402

README = Path(__file__).resolve().parents[2] / "docs" / "training-audit.md"
SECTION = "## In your Keras training: `TrainingAuditor`"


def readme_example() -> str:
    text = README.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)[0]


def synthetic(n: int = 1000, features: int = 10, zero_features: int = 0, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype("float32")
    x[:, :zero_features] = 0.0
    y = (x[:, zero_features:].sum(axis=1) > 0).astype("int64")
    return x, y


def mlp(features: int = 10, cls: Any = None, **kwargs: Any) -> Any:
    tf.keras.utils.set_random_seed(0)
    layers = [
        tf.keras.Input((features,)),
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(2),
    ]
    return (cls or tf.keras.Sequential)(layers=layers, **kwargs)


def test_readme_example_changes_few_lines_and_gives_a_verdict() -> None:
    from sklearn.datasets import load_digits

    code = readme_example()
    changed = [line for line in code.splitlines() if line.rstrip().endswith("# audit")]
    assert 0 < len(changed) <= 10
    digits = load_digits()
    keep = np.random.default_rng(0).permutation(len(digits.target))[:640]  # 100 steps instead of 230
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential(
        [tf.keras.Input((64,)), tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(10)]
    )
    namespace: dict[str, Any] = {
        "model": model,
        "x_train": (digits.data[keep] / 16.0).astype("float32"),
        "y_train": digits.target[keep].astype("int64"),
    }
    exec(compile(code, str(README), "exec"), namespace)  # the README's code, as written
    verdict = namespace["verdict"]
    assert verdict.bound.canaries == 500 and verdict.runs == 1
    assert verdict.bound.assumption == ASSUMPTIONS["steinke"] and verdict.bound.confidence == 0.975
    assert math.isfinite(verdict.epsilon_lower) and verdict.epsilon_lower >= 0.0
    assert verdict.claimed_epsilon == pytest.approx(namespace["declared"].claimed_epsilon)
    exact = {"steps", "records_per_epoch", "repeated_batches", "noise_present"}
    assert exact <= {c.name for c in verdict.checks}
    assert not any(c.rejected for c in verdict.checks if c.name in exact)
    assert str(verdict).splitlines()[0] == verdict.headline()


def test_wrap_mixes_exactly_the_included_canaries_once_per_epoch() -> None:
    x, y = synthetic(300)
    audit = TrainingAuditor(canaries=50, kind="input", seed=3)
    wrapped = audit.wrap(tf.data.Dataset.from_tensor_slices((x, y)).batch(32))
    xs, ys = zip(*[(bx.numpy(), by.numpy()) for bx, by in wrapped], strict=True)
    assert max(len(b) for b in xs) == 32
    assert sum(len(b) for b in xs) == 300 + int(audit.included.sum())
    # mislabeled canaries: the first 50 inputs with a different label
    assert np.array_equal(audit._canary_x, x[:50]) and np.all(audit._canary_y != y[:50])


def _gradient_run(kind_of_model: str) -> tuple[TrainingAuditor, Any, float]:
    """z = 0, q = 1, coordinates in the first kernel's rows of two always-zero input features: the
    data never moves them, so each included canary moves by exactly lr·C/n per step under SGD."""
    x, y = synthetic(400, zero_features=2)
    batch, epochs, clip, lr = 50, 2, 1.5, 0.1
    coords = [(0, i) for i in range(0, 32, 2)]  # kernel (10, 16): flat 0..31 are rows 0 and 1
    audit = TrainingAuditor(
        canaries=len(coords), kind="gradient", seed=1, sampling_rate=1.0, coordinates=coords
    )
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    if kind_of_model == "dpsequential":
        model = mlp(cls=tfp_opt.DPSequential, l2_norm_clip=clip, noise_multiplier=0.0, use_xla=False)
        mean_loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        model.compile(optimizer=tf.keras.optimizers.SGD(lr), loss=mean_loss)
    else:
        opt_cls = tfp_opt.DPKerasSGDOptimizer if kind_of_model == "sgd" else tfp_opt.DPKerasAdamOptimizer
        model = mlp()
        model.compile(optimizer=opt_cls(l2_norm_clip=clip, noise_multiplier=0.0, learning_rate=lr), loss=loss)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)
    model.fit(ds, epochs=epochs, callbacks=[audit.callback()], verbose=0)
    steps = epochs * (len(x) // batch)
    return audit, model, steps * lr * clip / batch


@pytest.mark.parametrize("kind_of_model", ["sgd", "dpsequential"])
def test_gradient_canaries_move_their_coordinate_by_lr_clip_over_batch(kind_of_model: str) -> None:
    audit, model, expected = _gradient_run(kind_of_model)
    scores = audit.scores(model)
    np.testing.assert_allclose(scores[audit.included], expected, rtol=1e-4)
    np.testing.assert_allclose(scores[~audit.included], 0.0, atol=1e-7)
    result = audit.result(model)
    assert result.kind == "gradient" and math.isfinite(result.steinke.epsilon_lower)


def test_gradient_canaries_with_adam_move_included_coordinates_only() -> None:
    audit, model, _ = _gradient_run("adam")
    scores = audit.scores(model)
    assert np.all(scores[audit.included] > 1e-3)
    np.testing.assert_allclose(scores[~audit.included], 0.0, atol=1e-7)


def test_noisy_gradient_canaries_give_a_bound_below_the_mechanisms_epsilon() -> None:
    """Inert coordinates, q = 1, T steps of noise z: each score is an ideal Gaussian game with
    μ = √T / z, so 0 < ε_LB(steinke) ≤ ε_LB(fdp_gaussian) ≤ ε(μ) (at this seed; the bound's level
    is checked in tests/bounds/test_onerun_bounds.py)."""
    from dpaudit.bounds.tradeoff import gdp_epsilon

    features, zero, batch, epochs, z = 80, 64, 100, 2, 1.0
    x, y = synthetic(400, features=features, zero_features=zero)
    coords = [(0, i) for i in range(1000)]  # kernel (80, 16): flat 0..1023 are the 64 zero rows
    audit = TrainingAuditor(canaries=1000, kind="gradient", seed=2, sampling_rate=1.0, coordinates=coords)
    model = mlp(features)
    model.compile(
        optimizer=tfp_opt.DPKerasSGDOptimizer(l2_norm_clip=1.0, noise_multiplier=z, learning_rate=0.1),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none"),
    )
    model.fit(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(batch),
        epochs=epochs,
        callbacks=[audit.callback()],
        verbose=0,
    )
    steps = epochs * len(x) // batch
    true_eps = gdp_epsilon(math.sqrt(steps) / z, 1e-5)
    result = audit.result(model)
    assert 0.0 < result.steinke.epsilon_lower <= result.fdp_gaussian.epsilon_lower <= true_eps


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ValueError, match="kind"):
        TrainingAuditor(kind="weights")
    with pytest.raises(ValueError, match="sampling_rate"):
        TrainingAuditor(kind="gradient", sampling_rate=1.5)
    with pytest.raises(ValueError, match="wrap"):
        TrainingAuditor(kind="gradient").wrap(tf.data.Dataset.from_tensor_slices(([0.0], [0])))
