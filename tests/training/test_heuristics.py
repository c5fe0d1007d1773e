"""The heuristic defences' trainer, RelaxLoss (Chen et al. 2022) and SELENA (Tang et al. 2022)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dpaudit.config import ParamsError
from dpaudit.training.heuristics import (
    RelaxLossConfig,
    SelenaConfig,
    cross_entropy,
    exclusion_mask,
    flattened_targets,
    relaxloss_objective,
    split_ai,
    split_ai_targets,
    train_minibatch,
    train_relaxloss,
    train_selena,
)
from dpaudit.training.models import mlp


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPAUDIT_PROGRESS", "0")


def blobs(n: int, seed: int, classes: int = 3, dim: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs around well-separated class centres (a learnable toy problem)."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(size=(classes, dim)) * 2.5
    y = rng.integers(0, classes, n)
    return (centres[y] + rng.normal(size=(n, dim))).astype(np.float32), y


def mean_loss(model, params, X, y, mask) -> float:
    return float((model.losses(params, X, y) * mask).sum() / mask.sum())


def test_trainer_reproducible_and_learns() -> None:
    X, y = blobs(120, 0)
    model = mlp("toy", 5, 3, (8,))
    mask = np.random.default_rng(1).random((3, 120)) < 0.6
    kw = dict(learning_rate=0.5, steps=60, sampling_rate=0.1, desc="t")
    a = train_minibatch(model, X, y, mask, cross_entropy, seed=4, **kw)
    b = train_minibatch(model, X, y, mask, cross_entropy, seed=4, **kw)
    c = train_minibatch(model, X, y, mask, cross_entropy, seed=5, **kw)
    assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])
    before = mean_loss(model, model.init(3, 4), X, y, mask)
    assert mean_loss(model, a, X, y, mask) < 0.3 * before
    chunked = train_minibatch(model, X, y, mask, cross_entropy, seed=4, chunk_size=2, **kw)
    assert mean_loss(model, chunked, X, y, mask) < 0.3 * before  # padded last chunk trains too


def test_one_hot_soft_targets_equal_hard_labels() -> None:
    X, y = blobs(60, 1)
    model = mlp("toy", 5, 3, (8,))
    mask = np.random.default_rng(2).random((2, 60)) < 0.7
    kw = dict(learning_rate=0.5, steps=20, sampling_rate=0.2, seed=3, desc="t")
    hard = train_minibatch(model, X, y, mask, cross_entropy, **kw)
    soft = train_minibatch(model, X, np.broadcast_to(np.eye(3)[y], (2, 60, 3)), mask, cross_entropy, **kw)
    for h, s in zip(hard, soft, strict=True):
        np.testing.assert_allclose(h, s, atol=1e-5)


def test_non_members_never_enter_a_batch() -> None:
    """Non-member rows hold NaN inputs and NaN soft targets: one in any batch would make θ NaN."""
    X, y = blobs(50, 2)
    mask = np.random.default_rng(3).random((4, 50)) < 0.5
    mask[:, 0], mask[:, 1] = True, False  # row 1: a member of no trial
    X[1] = np.nan
    targets = np.broadcast_to(np.eye(3)[y], (4, 50, 3)).copy()
    targets[~mask] = np.nan
    model = mlp("toy", 5, 3, (8,))
    kw = dict(learning_rate=0.5, steps=40, sampling_rate=0.3, seed=0, desc="t")
    for out in (train_minibatch(model, X, targets, mask, cross_entropy, **kw),
                train_minibatch(model, X, y, mask, cross_entropy, **kw)):  # fmt: skip
        assert all(np.isfinite(p).all() for p in out)
        assert not np.allclose(out[0], model.init(4, 0)[0])


def test_relaxloss_branches_on_hand_made_logits() -> None:
    logits = tf.constant([[[2.0, 0.0, -1.0], [0.5, 1.5, 0.0]]])  # one trial, a batch of two
    labels = tf.constant([[0, 1]])
    probs = tf.nn.softmax(logits).numpy()[0]
    ce = float(-np.mean(np.log(probs[[0, 1], [0, 1]])))
    above = relaxloss_objective(logits, labels, tf.constant(0), alpha=ce - 0.01).numpy()
    np.testing.assert_allclose(above, [ce], rtol=1e-6)  # L ≥ α: plain CE, in any epoch
    odd_above = relaxloss_objective(logits, labels, tf.constant(3), alpha=ce - 0.01).numpy()
    np.testing.assert_allclose(odd_above, [ce], rtol=1e-6)
    even = relaxloss_objective(logits, labels, tf.constant(2), alpha=ce + 0.01).numpy()
    np.testing.assert_allclose(even, [-ce], rtol=1e-6)  # below α, even epoch: ascent
    odd = relaxloss_objective(logits, labels, tf.constant(1), alpha=ce + 0.01).numpy()
    expected = 0.0
    for n, yn in enumerate([0, 1]):
        target = np.full(3, (1 - probs[n, yn]) / 2)
        target[yn] = probs[n, yn]
        expected += -np.sum(target * np.log(probs[n])) / 2
    np.testing.assert_allclose(odd, [expected], rtol=1e-5)
    np.testing.assert_allclose(flattened_targets(logits, labels).numpy().sum(-1), 1.0, rtol=1e-6)
    # Two trials in one call take different branches.
    both = relaxloss_objective(tf.concat([logits, 10 * logits], 0), tf.concat([labels, labels], 0),
                               tf.constant(2), alpha=ce / 2)  # fmt: skip
    assert both.numpy()[0] == pytest.approx(ce, rel=1e-6) and both.numpy()[1] < 0


def test_relaxloss_gradient_stops_at_the_flattening_target() -> None:
    logits = tf.Variable([[[2.0, 0.0, -1.0]]])
    with tf.GradientTape() as tape:
        value = relaxloss_objective(logits, tf.constant([[0]]), tf.constant(1), alpha=10.0)
    grad = tape.gradient(value, logits).numpy()[0, 0]
    probs = tf.nn.softmax(logits).numpy()[0, 0]
    target = np.array([probs[0], (1 - probs[0]) / 2, (1 - probs[0]) / 2])
    np.testing.assert_allclose(grad, probs - target, atol=1e-6)  # softmax − target: no gradient via target


def test_relaxloss_training_loss_sits_near_alpha() -> None:
    X, y = blobs(150, 3, classes=4, dim=6)
    model = mlp("toy", 6, 4, (32,))
    mask = np.ones((2, 150), bool)
    cfg = RelaxLossConfig(alpha=0.5, learning_rate=0.5, epochs=40, sampling_rate=0.2)
    relaxed = train_relaxloss(model, X, y, mask, cfg, seed=0)
    plain = train_minibatch(model, X, y, mask, cross_entropy, learning_rate=0.5, steps=cfg.steps,
                            sampling_rate=0.2, seed=0, desc="t")  # fmt: skip
    relaxed_loss, plain_loss = mean_loss(model, relaxed, X, y, mask), mean_loss(model, plain, X, y, mask)
    assert 0.5 / 2 < relaxed_loss < 0.5 * 2
    assert plain_loss < 0.5 / 5


def test_exclusion_mask_excludes_each_record_from_exactly_l() -> None:
    ex = exclusion_mask(5, 200, 8, 3, seed=1)
    assert ex.shape == (5, 200, 8)
    assert (ex.sum(-1) == 3).all()
    share = ex.mean(axis=(0, 1))  # each sub-model excluded from ≈ L/K = 0.375 of the rows
    assert share.min() > 0.3 and share.max() < 0.45
    assert np.array_equal(ex, exclusion_mask(5, 200, 8, 3, seed=1))


def test_split_ai_targets_use_only_excluded_submodels() -> None:
    """Sub-models that trained on a row say class 0, the others class 1: the soft label is class 1."""
    ex = exclusion_mask(2, 30, 5, 2, seed=0)
    probs = np.where(np.moveaxis(ex, 2, 1)[..., None], np.eye(3)[1], np.eye(3)[0])  # [T, K, N, C]
    np.testing.assert_allclose(split_ai_targets(probs, ex), np.broadcast_to(np.eye(3)[1], (2, 30, 3)))


def test_split_ai_does_not_echo_memorised_random_labels() -> None:
    """Random labels can only be memorised: sub-models that trained on a member give its label high
    probability, while its Split-AI soft label (sub-models that never saw it) stays near chance."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 10)).astype(np.float32)
    y = rng.integers(0, 4, 40)
    model = mlp("toy", 10, 4, (64,))
    mask = np.ones((2, 40), bool)
    cfg = SelenaConfig(submodels=4, excluded=2, learning_rate=0.5, epochs=150, sampling_rate=0.25)
    ens = split_ai(model, X, y, mask, cfg, seed=0)
    sub_mask = ens.submodel_mask(mask)
    assert np.array_equal(sub_mask.reshape(2, 4, 40), ~np.moveaxis(ens.excluded, 2, 1))
    probs = model.predict_proba(ens.submodel_params, X)[:, np.arange(40), y]  # [T·K, N]
    assert probs[sub_mask].mean() > 0.8
    own = ens.targets[:, np.arange(40), y]
    assert own.mean() < 0.4
    expected = probs.reshape(2, 4, 40)
    np.testing.assert_allclose(own, (expected * np.moveaxis(ens.excluded, 2, 1)).sum(1) / 2, atol=1e-5)


def test_selena_student_learns_a_toy_problem() -> None:
    X, y = blobs(300, 4)
    Xt, yt = blobs(300, 5)
    model = mlp("toy", 5, 3, (16,))
    mask = np.random.default_rng(6).random((2, 300)) < 0.6
    cfg = SelenaConfig(submodels=4, excluded=1, learning_rate=0.5, epochs=10, distill_epochs=10)
    students = train_selena(model, X, y, mask, cfg, seed=0)
    assert students[0].shape == (2, *model.param_shapes[0])
    acc = (model.predict_proba(students, Xt).argmax(-1) == yt).mean(axis=1)
    assert (acc > 0.9).all()


def test_selena_distils_the_split_ai_soft_labels_not_the_hard_ones() -> None:
    """Random labels can only be memorised. The released student must learn each member's Split-AI soft
    label (Tang et al.: the privacy comes from distilling outputs of sub-models that never saw the
    record): its outputs on members stay within 0.1 in total variation of those soft labels and give
    the member's own random label the soft label's probability, not the ≈ 1 of a model that saw it.
    Distilling the hard labels y gives TV ≈ 0.57 and own-label probability ≈ 1; the soft labels'
    argmax (one-hot) gives TV ≈ 0.3."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 10)).astype(np.float32)
    y = rng.integers(0, 4, 40)
    model = mlp("toy", 10, 4, (64,))
    mask = np.ones((2, 40), bool)
    mask[:, ::4] = False
    cfg = SelenaConfig(submodels=4, excluded=2, learning_rate=0.5, epochs=150, distill_epochs=150,
                       sampling_rate=0.25)  # fmt: skip
    soft = split_ai(model, X, y, mask, cfg, seed=0).targets  # the same seed: train_selena's Split-AI
    students = train_selena(model, X, y, mask, cfg, seed=0)
    out = model.predict_proba(students, X)  # [T, N, C]
    tv = 0.5 * np.abs(out - soft).sum(axis=-1)[mask]
    own, own_soft = out[:, np.arange(40), y][mask], soft[:, np.arange(40), y][mask]
    assert tv.mean() < 0.1
    assert own.mean() == pytest.approx(own_soft.mean(), abs=0.05) and own.mean() < 0.6
    assert soft.max(axis=-1)[mask].mean() < 0.8  # the soft labels are soft: a one-hot target would differ


@pytest.mark.parametrize(
    ("cls", "kwargs", "key"),
    [
        (RelaxLossConfig, {"alpha": 0.0}, "alpha"),
        (RelaxLossConfig, {"learning_rate": -1.0}, "learning_rate"),
        (RelaxLossConfig, {"epochs": float("nan")}, "epochs"),
        (RelaxLossConfig, {"sampling_rate": 1.5}, "sampling_rate"),
        (SelenaConfig, {"submodels": 1, "excluded": 1}, "submodels"),
        (SelenaConfig, {"submodels": 4, "excluded": 4}, "excluded"),
        (SelenaConfig, {"excluded": 0}, "excluded"),
        (SelenaConfig, {"distill_epochs": 0.0}, "distill_epochs"),
        (SelenaConfig, {"sampling_rate": 0.0}, "sampling_rate"),
    ],
)
def test_validation_errors_name_the_key(cls: type, kwargs: dict, key: str) -> None:
    with pytest.raises(ParamsError, match=f"'{key}' = {list(kwargs.values())[-1]!r}"):
        cls(**kwargs)
