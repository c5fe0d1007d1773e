"""HAMP (Chen and Pattabiraman, NDSS 2024): soft labels, loss, output modification, training."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from dpaudit.config import ParamsError
from dpaudit.training.heuristics.hamp import (
    HampConfig,
    hamp_logits,
    hamp_loss,
    hamp_objective,
    hamp_outputs,
    soft_label_probability,
    soft_labels,
    train_hamp,
)
from dpaudit.training.heuristics.trainer import LossContext, cross_entropy, train_minibatch
from dpaudit.training.models import mlp


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPAUDIT_PROGRESS", "0")


def entropy(p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, np.float64)
    return -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=-1)


def blobs(n: int, seed: int, classes: int = 3, dim: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs around well-separated class centres, squashed into [0, 1]."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(size=(classes, dim)) * 2.5
    y = rng.integers(0, classes, n)
    X = centres[y] + rng.normal(size=(n, dim))
    return (1.0 / (1.0 + np.exp(-X))).astype(np.float32), y


@pytest.mark.parametrize("classes", [2, 10, 100])
@pytest.mark.parametrize("gamma", [1e-9, 1e-3, 0.5, 0.9, 0.999, 1 - 1e-9])
def test_soft_labels_reach_the_entropy_threshold(classes: int, gamma: float) -> None:
    p = soft_label_probability(gamma, classes)
    assert 1.0 / classes < p < 1.0
    exact = np.full(classes, (1.0 - p) / (classes - 1))
    exact[0] = p
    assert entropy(exact) == pytest.approx(gamma * math.log(classes), abs=1e-6)
    y = np.arange(7) % classes
    labels = soft_labels(y, classes, gamma)
    assert labels.shape == (7, classes) and labels.dtype == np.float32
    assert np.array_equal(labels.argmax(axis=1), y)
    np.testing.assert_allclose(labels.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(entropy(labels), gamma * math.log(classes), atol=2e-5)


def test_soft_labels_flatten_with_gamma_and_reject_bad_thresholds() -> None:
    ps = [soft_label_probability(g, 10) for g in (0.1, 0.5, 0.9)]
    assert ps[0] > ps[1] > ps[2] > 0.1
    for bad in (0.0, 1.0, -0.5, float("nan")):
        with pytest.raises(ValueError, match="entropy_threshold"):
            soft_label_probability(bad, 10)


def test_loss_matches_hand_computation() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 4)) * 2.0
    targets = rng.dirichlet(np.ones(4), size=(2, 3))
    z = logits - logits.max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    ce = -(targets * log_p).sum(-1).mean(-1)
    ent = -(np.exp(log_p) * log_p).sum(-1).mean(-1)
    lt, tt = tf.constant(logits, tf.float32), tf.constant(targets, tf.float32)
    for alpha in (0.0, 0.05, 1.0):
        expected = ce - alpha * ent
        np.testing.assert_allclose(hamp_objective(lt, tt, alpha).numpy(), expected, rtol=1e-5)
        ctx = LossContext(step=tf.constant(0, tf.int64), epoch=tf.constant(0, tf.int64))
        np.testing.assert_allclose(hamp_loss(alpha)(lt, tt, ctx).numpy(), expected, rtol=1e-5)


def _toy_outputs() -> tuple:
    model = mlp("toy", 5, 6, (16,))
    params = [p * 3.0 for p in model.init(3, 1)]  # sharper outputs, so rankings are distinct
    X = np.random.default_rng(2).random((40, 5)).astype(np.float32)
    return model, params, X


def test_output_modification_keeps_the_ranking_and_uses_random_inputs() -> None:
    model, params, X = _toy_outputs()
    out = hamp_outputs(model, params, X, seed=7)
    real = model.predict_proba(params, X)
    assert out.shape == real.shape == (3, 40, 6)
    assert np.array_equal(out.argmax(-1), real.argmax(-1))
    assert np.array_equal(np.argsort(-out, axis=-1), np.argsort(-real, axis=-1))  # the whole ranking
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-5)
    # the values are the softmax of the model on U[0, 1) inputs drawn from default_rng(seed)
    noise = np.random.default_rng(7).uniform(0.0, 1.0, size=(3, 40, 5)).astype(np.float32)
    fake, _ = model.forward([tf.constant(p) for p in params], tf.constant(noise), shared=False)
    fake_probs = tf.nn.softmax(fake).numpy()
    np.testing.assert_allclose(np.sort(out, -1), np.sort(fake_probs, -1), atol=1e-6)
    assert not np.allclose(np.sort(out, -1), np.sort(real, -1), atol=1e-3)  # not the query's own values


def test_output_modification_is_reproducible_and_chunk_invariant() -> None:
    model, params, X = _toy_outputs()
    a = hamp_outputs(model, params, X, seed=3)
    assert np.array_equal(a, hamp_outputs(model, params, X, seed=3))
    assert not np.allclose(a, hamp_outputs(model, params, X, seed=4))
    chunked = hamp_outputs(model, params, X, seed=3, budget_floats=50)  # one trial, a few rows at a time
    np.testing.assert_allclose(chunked, a, atol=1e-6)
    logits = hamp_logits(model, params, X, seed=3)
    np.testing.assert_allclose(np.exp(logits), a, atol=1e-7)
    np.testing.assert_allclose(tf.nn.softmax(logits).numpy(), a, atol=1e-6)
    with pytest.raises(ValueError, match="expects"):
        hamp_outputs(model, params, X[:, :4], seed=3)


def test_trained_hamp_model_is_less_confident_on_its_members() -> None:
    X, y = blobs(200, 0)
    Xt, yt = blobs(200, 1)
    model = mlp("toy", 5, 3, (16,))
    mask = np.random.default_rng(3).random((2, 200)) < 0.6
    cfg = HampConfig(entropy_threshold=0.7, alpha=0.05, learning_rate=0.5, epochs=15)
    hamp = train_hamp(model, X, y, mask, cfg, seed=0)
    again = train_hamp(model, X, y, mask, cfg, seed=0)
    assert all(np.array_equal(p, q) for p, q in zip(hamp, again, strict=True))
    plain = train_minibatch(model, X, y, mask, cross_entropy, learning_rate=0.5, steps=cfg.steps,
                            sampling_rate=cfg.sampling_rate, seed=0, desc="ce")  # fmt: skip
    ent_hamp = entropy(model.predict_proba(hamp, X))[mask].mean()
    ent_plain = entropy(model.predict_proba(plain, X))[mask].mean()
    assert ent_hamp > ent_plain + 0.3
    acc = (model.predict_proba(hamp, Xt).argmax(-1) == yt).mean(axis=1)
    assert (acc > 0.85).all()


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"entropy_threshold": 0.0}, "entropy_threshold"),
        ({"entropy_threshold": 1.0}, "entropy_threshold"),
        ({"alpha": -0.1}, "alpha"),
        ({"alpha": float("inf")}, "alpha"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"epochs": -1.0}, "epochs"),
        ({"sampling_rate": 1.5}, "sampling_rate"),
    ],
)
def test_validation_errors_name_the_key(kwargs: dict, key: str) -> None:
    with pytest.raises(ParamsError, match=f"'{key}' = {list(kwargs.values())[-1]!r}"):
        HampConfig(**kwargs)
    HampConfig(alpha=0.0)  # α = 0 (no entropy reward) is allowed
