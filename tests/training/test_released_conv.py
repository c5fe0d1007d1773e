"""Released coordinates on convolutions: with learning rate 0 the trainer releases the privatized sums
at convolution kernel and bias entries too (gathered from the per-example gradients its norms form), so
threat model F's play runs on a CNN, whose least-updated coordinates are first-layer kernel weights."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.training import dpsgd, models
from dpaudit.training.dpsgd import InjectedGradient, privatized_sum_observer


def tiny_cnn(T: int) -> tuple[models.Model, np.ndarray, np.ndarray, list[np.ndarray]]:
    """A 10×10×1 CNN (conv 2 filters → pool → conv 3 filters → pool → dense 2): parameters
    [3,3,1,2] (18), [2], [3,3,2,3] (54), [3], [3,2] (6), [2] — 85 in all."""
    rng = np.random.default_rng(1)
    model = models.cnn("tiny", (10, 10, 1), 2, [2, 3])
    X = rng.uniform(size=(24, 10, 10, 1)).astype(np.float32)
    y = rng.integers(0, 2, 24)
    init = [np.repeat(p, T, axis=0) for p in model.init(1, 5)]
    return model, X, y, init


def flat_split(model: models.Model, values: dict[int, float]) -> list[np.ndarray]:
    flat = np.zeros(model.num_params, np.float32)
    for c, v in values.items():
        flat[c] = v
    offsets = np.cumsum([0, *(int(np.prod(s)) for s in model.param_shapes)])
    return [flat[offsets[i] : offsets[i + 1]].reshape(s) for i, s in enumerate(model.param_shapes)]


@pytest.mark.parametrize(("q", "strategy"), [(1.0, "single"), (0.4, "auto"), (0.4, "trials")])
def test_released_sums_at_conv_coordinates_equal_the_full_step(q: float, strategy: str) -> None:
    """First- and second-layer kernel and bias entries and dense entries, out of order, with a gated
    canary on two of them: full batch and gathered Poisson batches (per-trial inputs), one model at a
    time and trials at once. At zero noise the released sums equal the full computation's."""
    model, X, y, init = tiny_cnn(T=5)
    assert model.num_params == 85
    # conv2 kernel, conv1 kernel and bias, conv2 bias, dense, in no order (conv1 0..19, conv2 20..76)
    coords = [30, 1, 17, 18, 19, 75, 21, 84, 78, 7, 42]
    T = len(init[0])
    kw = {
        "init_params": init,
        "observers": {"s": privatized_sum_observer(coords)},
        "injected": InjectedGradient(
            grads=flat_split(model, {1: 0.6, 30: -0.8}),
            weights=np.ones(T, np.float32),
            gate=(np.arange(T) % 2).astype(np.float32),
        ),
        "strategy": strategy,
    }
    cfg = dpsgd.DPSGDConfig(1.0, 0.0, 0.0, 4, sampling_rate=q)
    mask = np.ones((T, len(X)), bool)
    released = dpsgd.train_trials(model, X, y, mask, cfg, seed=3, released=coords, **kw)
    # the same chunks (hence the same batch draws) for the full step as the released run used
    size, _ = dpsgd.chunk_layout(model, mask, cfg, strategy=strategy, released=coords, init_params=init)
    full = dpsgd.train_trials(model, X, y, mask, cfg, seed=3, chunk_size=size, **kw)
    s = full.records["s"]
    assert s.shape == (T, 4, len(coords))
    assert (np.abs(s[..., :7]) > 1e-4).mean() > 0.8  # conv entries carry data gradient (and canary)
    np.testing.assert_allclose(released.records["s"], s, rtol=1e-5, atol=1e-6)
    for a, b in zip(released.params, init, strict=True):
        np.testing.assert_array_equal(a, b)


def test_released_conv_noise_is_gaussian_with_sigma() -> None:
    """Released minus noiseless sums at conv coordinates are N(0, σ²), σ = z·C (3000 draws, 4 s.e.)."""
    model, X, y, init = tiny_cnn(T=150)
    coords = [3, 19, 50]
    obs = {"s": privatized_sum_observer(coords)}
    mask = np.ones((150, len(X)), bool)
    kw = {"init_params": init, "observers": obs, "released": coords, "seed": 2}
    a = dpsgd.train_trials(model, X, y, mask, dpsgd.DPSGDConfig(0.5, 2.0, 0.0, 20, sampling_rate=0.3), **kw)
    b = dpsgd.train_trials(model, X, y, mask, dpsgd.DPSGDConfig(0.5, 0.0, 0.0, 20, sampling_rate=0.3), **kw)
    xi = (a.records["s"] - b.records["s"]).reshape(-1, len(coords))
    n, sigma = len(xi), 1.0
    assert np.all(np.abs(xi.mean(axis=0)) < 4 * sigma / np.sqrt(n))
    assert np.all(np.abs(xi.var(axis=0) / sigma**2 - 1) < 4 * np.sqrt(2 / n))


def test_threat_model_f_audits_a_tiny_cnn_end_to_end() -> None:
    """F's play (Crafter 5's dataset, Crafter 4's canary on the least-updated coordinates — here
    convolution weights — learning rate 0, released sums), Distinguisher 3's scores and
    the per-step family bound on a tiny CNN. The projections follow the family: D′ minus D means q·C
    per step, both spreads ≈ z·C; the bound is positive and below ε_PLD of the mechanism."""
    from dpaudit.bounds.accountants import epsilon_pld
    from dpaudit.bounds.stepwise import StepMoments, stepwise_family_bound
    from dpaudit.bounds.tradeoff import SubsampledGaussian
    from dpaudit.experiments.instantiation.design import balanced_inserted
    from dpaudit.experiments.instantiation.design.crafters.canary import (
        clipped_gradient_mass,
        craft_malicious_dataset,
        play_malicious_dataset,
    )
    from dpaudit.experiments.instantiation.design.distinguishers import distinguisher3
    from dpaudit.experiments.instantiation.design.game import Game

    model, X, y, _ = tiny_cnn(T=1)
    q, steps, z, delta, n, seed = 0.5, 12, 1.0, 1e-5, 150, 4
    lo, hi = np.zeros((10, 10, 1), np.float32), np.ones((10, 10, 1), np.float32)
    game = Game(
        model=model, X_d=X[:12], y_d=y[:12], X_pool=X[12:], y_pool=y[12:], X_eval=X, y_eval=y,
        lo=lo, hi=hi, sampling_rate=q, steps=steps, clip_norm=1.0, learning_rate=0.0,
    )  # fmt: skip
    # The play's canary goes to the 2 coordinates of least data mass (here 0: a dead first-layer
    # filter): whatever the tie-break, they are convolution entries (0..76), not dense ones.
    params0 = model.init(1, seed)
    Xm, ym = craft_malicious_dataset(model, params0, 12, lo, hi, seed)
    mass = clipped_gradient_mass(model, params0, Xm, ym, 1.0)
    assert np.all(np.flatnonzero(mass <= np.sort(mass)[1]) < 77)
    inserted = balanced_inserted(n, [seed, 1])
    view = play_malicious_dataset(game, z, inserted, seed, dataset_size=12, canary_size=2)
    dots = view["dots"]
    assert dots.shape == (2 * n, steps)
    d1, d0 = dots[inserted == 1], dots[inserted == 0]
    se = z * np.sqrt(2.0 / (n * steps)) + 0.05
    assert abs((d1.mean() - d0.mean()) - q * 1.0) < 4 * se
    assert 0.85 < d0.std() < 1.25 and 0.85 < d1.std() < 1.35
    lr, literal = distinguisher3(dots, view["canary_size"], sampling_rate=q, noise_std=z, clip_norm=1.0)
    assert lr[inserted == 1].mean() > lr[inserted == 0].mean()
    bound = stepwise_family_bound(
        StepMoments.of(d1), StepMoments.of(d0), SubsampledGaussian(q, steps), delta=delta,
        confidence=0.95, known_baseline=0.0 if float(view["data_mass_at_canary"]) == 0.0 else None,
    )  # fmt: skip
    assert 0.0 < bound.epsilon < epsilon_pld(z, q, steps, delta)
