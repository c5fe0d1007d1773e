"""Released coordinates (issue 13, threat model F): with learning rate 0 the trainer forms the clipped
sum and the noise at the observed coordinates only. The released values must equal a full step's at
those coordinates (zero noise), carry N(0, σ²) noise, and the mode must refuse what it cannot do."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.training import dpsgd, models
from dpaudit.training.dpsgd import InjectedGradient, privatized_sum_observer


def problem(T: int = 6) -> tuple[models.Model, np.ndarray, np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    model = models.mlp("released", 5, 3, [4, 3])
    X = rng.normal(size=(40, 5)).astype(np.float32)
    y = rng.integers(0, 3, 40)
    init = [np.repeat(p, T, axis=0) for p in model.init(1, 3)]
    return model, X, y, init


def canary_grads(model: models.Model, coords: dict[int, float]) -> list[np.ndarray]:
    flat = np.zeros(model.num_params, np.float32)
    for c, v in coords.items():
        flat[c] = v
    offsets = np.cumsum([0, *(int(np.prod(s)) for s in model.param_shapes)])
    return [flat[offsets[i] : offsets[i + 1]].reshape(s) for i, s in enumerate(model.param_shapes)]


@pytest.mark.parametrize("q", [1.0, 0.3])
def test_released_sums_equal_a_full_step_at_zero_noise(q: float) -> None:
    """Kernel and bias entries of every layer, out of order, with a gated canary (full batch and
    gathered Poisson batches from the same draws)."""
    model, X, y, init = problem()
    T = len(init[0])
    coords = [model.num_params - 1, 3, 21, 24, 25, 0, 41]
    kw = {
        "init_params": init,
        "observers": {"s": privatized_sum_observer(coords)},
        "injected": InjectedGradient(
            grads=canary_grads(model, {21: 0.6, 25: -0.8}),
            weights=np.ones(T, np.float32),
            gate=(np.arange(T) % 2).astype(np.float32),
        ),
    }
    cfg = dpsgd.DPSGDConfig(1.0, 0.0, 0.0, 5, sampling_rate=q)
    mask = np.ones((T, len(X)), bool)
    full = dpsgd.train_trials(model, X, y, mask, cfg, seed=4, **kw)
    released = dpsgd.train_trials(model, X, y, mask, cfg, seed=4, released=coords, **kw)
    assert np.abs(full.records["s"]).max() > 0.1
    np.testing.assert_allclose(released.records["s"], full.records["s"], atol=1e-6)
    for a, b in zip(released.params, init, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("q", [1.0, 0.3])
def test_released_sums_with_a_different_theta_per_trial(q: float) -> None:
    """Trials that start from different θ (the seeded initialisation, or distinct init_params) each
    get their own rows' invariant gradients: their released sums equal a full step's at zero noise,
    and they differ between trials, unlike trials sharing one θ."""
    model, X, y, _ = problem()
    T = 5
    init = model.init(T, seed=11)
    coords = [0, 7, 30, model.num_params - 2]
    cfg = dpsgd.DPSGDConfig(1.0, 0.0, 0.0, 4, sampling_rate=q)
    mask = np.ones((T, len(X)), bool)
    assert dpsgd.chunk_layout(model, mask, cfg, released=coords, init_params=init)[0] == T
    kw = {"init_params": init, "observers": {"s": privatized_sum_observer(coords)}, "seed": 6}
    full = dpsgd.train_trials(model, X, y, mask, cfg, **kw)
    released = dpsgd.train_trials(model, X, y, mask, cfg, released=coords, **kw)
    np.testing.assert_allclose(released.records["s"], full.records["s"], atol=1e-6)
    first = released.records["s"][:, 0]
    assert np.abs(first[1:] - first[:1]).max() > 1e-3


def test_released_chunks_are_large_when_trials_share_theta() -> None:
    """A released step evaluates no model when every trial starts from the same θ, so the "auto"
    strategy batches many trials a chunk (a CNN too, which otherwise trains 1–4 a chunk on CPU)."""
    cnn = models.cnn("c", (10, 10, 1), 2, [2, 3])
    shared = [np.repeat(p, 3000, axis=0) for p in cnn.init(1, 0)]
    mask = np.ones((3000, 50), bool)
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.0, 4, sampling_rate=0.1)
    assert dpsgd.chunk_layout(cnn, mask, cfg, released=[0], init_params=shared) == (1000, 3)
    assert dpsgd.chunk_layout(cnn, mask, cfg, init_params=shared)[0] <= 4


def test_released_noise_is_gaussian_with_sigma() -> None:
    """Released minus noiseless sums are N(0, σ²), σ = z·C: mean within 4 s.e., variance within
    4 s.e. of σ² (4000 draws), and independent across coordinates (correlation within 4 s.e.)."""
    model, X, y, init = problem(T=200)
    coords = [2, 30, 50]
    obs = {"s": privatized_sum_observer(coords)}
    mask = np.ones((200, len(X)), bool)
    noisy = dpsgd.DPSGDConfig(0.5, 3.0, 0.0, 20, sampling_rate=0.2)
    quiet = dpsgd.DPSGDConfig(0.5, 0.0, 0.0, 20, sampling_rate=0.2)
    a = dpsgd.train_trials(model, X, y, mask, noisy, seed=9, init_params=init, observers=obs, released=coords)
    b = dpsgd.train_trials(model, X, y, mask, quiet, seed=9, init_params=init, observers=obs, released=coords)
    xi = (a.records["s"] - b.records["s"]).reshape(-1, len(coords))
    sigma = 3.0 * 0.5
    n = len(xi)
    assert np.all(np.abs(xi.mean(axis=0)) < 4 * sigma / np.sqrt(n))
    assert np.all(np.abs(xi.var(axis=0) / sigma**2 - 1) < 4 * np.sqrt(2 / n))
    corr = np.corrcoef(xi.T)[np.triu_indices(len(coords), 1)]
    assert np.all(np.abs(corr) < 4 / np.sqrt(n))


def test_released_refuses_what_it_cannot_release() -> None:
    model, X, y, init = problem()
    T = len(init[0])
    mask = np.ones((T, len(X)), bool)
    frozen = dpsgd.DPSGDConfig(1.0, 1.0, 0.0, 2)
    with pytest.raises(ValueError, match="learning_rate 0"):
        dpsgd.train_trials(model, X, y, mask, dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 2), released=[0])
    with pytest.raises(ValueError, match="lie in 0"):
        dpsgd.train_trials(model, X, y, mask, frozen, released=[model.num_params])
    with pytest.raises(ValueError, match="distinct"):
        dpsgd.train_trials(model, X, y, mask, frozen, released=[1, 1])
    with pytest.raises(ValueError, match="not among the released"):
        dpsgd.train_trials(
            model, X, y, mask, frozen, released=[1, 2], observers={"s": privatized_sum_observer([3])}
        )
