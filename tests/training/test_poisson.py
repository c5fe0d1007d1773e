"""Gathered Poisson batches (issue 12): same draws, same batches, same update as the masked path;
batch sizes Binomial(|D_t|, q)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from scipy import stats

from dpaudit.training import dpsgd, models


def problem() -> tuple[models.Model, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(300, 6)).astype(np.float32)
    y = rng.integers(0, 3, 300)
    mask = rng.random((5, 300)) < np.array([0.2, 0.5, 0.8, 1.0, 0.6])[:, None]
    return models.mlp("m", 6, 3, (5, 4)), X, y, mask


def test_gathered_and_masked_batches_give_the_same_update() -> None:
    """For the same seed both paths select the same rows every step and give the same weights,
    observer records, tracked gradients and injections, up to float32 summation order."""
    model, X, y, mask = problem()
    cfg = dpsgd.DPSGDConfig(0.7, 1.3, 0.4, 6, sampling_rate=0.15)
    obs = {
        "b": lambda s: {"size": tf.reduce_sum(s.batch_mask, axis=1)},
        "loss": dpsgd.loss_observer([3, 200]),
        "clip": lambda s: {"": tf.gather(s.clip_factors, [3, 200], axis=1)},
        "t": lambda s: {"norm": s.tracked_norms},
        "g": dpsgd.privatized_sum_observer([0, 5, 40]),
    }
    inj = dpsgd.InjectedGradient([np.full(s, 0.05, np.float32) for s in model.param_shapes], np.ones(5))
    kw = {"observers": obs, "tracked": dpsgd.TrackedRecords((3, 200)), "injected": inj, "seed": 5}
    masked = dpsgd.train_trials(model, X, y, mask, cfg, batching="masked", **kw)
    gathered = dpsgd.train_trials(model, X, y, mask, cfg, batching="gathered", **kw)
    np.testing.assert_array_equal(masked.records["b.size"], gathered.records["b.size"])
    for k in masked.records:
        np.testing.assert_allclose(gathered.records[k], masked.records[k], rtol=1e-5, atol=1e-6, err_msg=k)
    for a, b in zip(masked.params, gathered.params, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=2e-6)
    full = dpsgd.train_trials(model, X, y, mask, cfg, seed=6)  # another seed: other batches
    assert not np.array_equal(full.params[0], masked.params[0])


def test_gathered_batch_sizes_are_binomial() -> None:
    """Batch sizes of trial t follow Binomial(|D_t|, q): mean, variance and a χ² goodness of fit
    (significance 1e-3, so a correct sampler fails it once in a thousand runs)."""
    model = models.mlp("m", 2, 2, (2,))
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 2)).astype(np.float32)
    y = rng.integers(0, 2, 400)
    sizes = np.array([400, 250, 100])
    mask = np.arange(400)[None, :] < sizes[:, None]
    mask = np.tile(mask, (40, 1))  # 120 trials, sizes cycling
    q = 0.1
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 50, sampling_rate=q)
    res = dpsgd.train_trials(
        model, X, y, mask, cfg, seed=2, batching="gathered",
        observers={"b": lambda s: {"": tf.reduce_sum(s.batch_mask, axis=1)}},
    )  # fmt: skip
    b = res.records["b"]  # [120, 50]
    for i, n in enumerate(sizes):
        draws = b[i::3].ravel()  # 2000 batches of a dataset of size n
        mean, var = n * q, n * q * (1 - q)
        assert abs(draws.mean() - mean) < 4 * np.sqrt(var / draws.size)
        assert abs(draws.var() / var - 1) < 0.15
        lo, hi = int(stats.binom.ppf(0.01, n, q)), int(stats.binom.ppf(0.99, n, q))
        ks = np.arange(lo, hi + 1)
        observed = np.array([(draws < lo).sum(), *[(draws == k).sum() for k in ks], (draws > hi).sum()])
        probs = np.array(
            [stats.binom.cdf(lo - 1, n, q), *stats.binom.pmf(ks, n, q), stats.binom.sf(hi, n, q)]
        )
        expected = probs / probs.sum() * draws.size
        assert stats.chisquare(observed, expected).pvalue > 1e-3
