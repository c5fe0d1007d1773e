"""Inert-feature canaries through the user's own DP optimizer: insertion, read-only taps, transcript."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tfp_opt = pytest.importorskip("tensorflow_privacy")

from dpaudit.training_audit import DeclaredDPSGD, TrainingAuditor  # noqa: E402
from dpaudit.training_audit.canaries import REMEDY, find_inert_features  # noqa: E402
from dpaudit.training_audit.transcript import transcript_scores  # noqa: E402

N, B, EPOCHS, FEATURES, ZERO = 240, 24, 3, 12, 3


def data(seed: int = 0, zero: int = ZERO) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, FEATURES)).astype("float32")
    x[:, :zero] = 0.0
    y = (x[:, zero:].sum(axis=1) > 0).astype("int64")
    return x, y


def declared(sigma: float = 1.0) -> DeclaredDPSGD:
    return DeclaredDPSGD(
        noise_multiplier=sigma, clip_norm=1.0, batch_size=B, dataset_size=N, epochs=EPOCHS, sampling="shuffle"
    )


def model_and_data(noise: float, seed: int = 0) -> tuple[Any, Any]:
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential(
        [tf.keras.Input((FEATURES,)), tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(2)]
    )
    model.compile(
        optimizer=tfp_opt.DPKerasSGDOptimizer(l2_norm_clip=1.0, noise_multiplier=noise, learning_rate=0.1),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none"),
    )
    x, y = data(seed)
    return model, tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N, seed=seed).batch(B)


def audited_run(noise: float, canaries: int = 80, seed: int = 0) -> TrainingAuditor:
    model, ds = model_and_data(noise, seed)
    audit = TrainingAuditor(canaries=canaries, declared=declared(1.0), seed=seed)
    model.fit(audit.wrap(ds), epochs=EPOCHS, callbacks=[audit.callback()], verbose=0)
    return audit


def rho(audit: TrainingAuditor) -> float:
    t = audit.transcript()
    return float((t.signal * t.signal_observed).sum() / (t.signal**2).sum())


def test_wrap_keeps_the_users_batches_and_adds_only_included_canaries_at_rate_q() -> None:
    x, y = data()
    audit = TrainingAuditor(canaries=400, declared=declared(), seed=1)
    wrapped = audit.wrap(tf.data.Dataset.from_tensor_slices((x, y)).batch(B))
    design = audit._inert.observer.design
    audit._inert.observer.table_x.assign(design.inputs(1.0)[audit.included])  # as install() does
    counts = []
    for epoch in range(2):
        seen = []
        for bx, by in wrapped:
            bx, by = bx.numpy(), by.numpy()
            canary = np.any(bx[:, design.features.canary] != 0, axis=1)
            assert np.array_equal(bx[~canary], x[len(seen) * B : len(seen) * B + (~canary).sum()])
            seen.append(int((~canary).sum()))
            counts.append(int(canary.sum()))
        assert seen == [B] * (N // B), epoch
    # each of the included canaries joins a batch with probability q = B / N
    expected = audit.included.sum() * B / N
    assert abs(np.mean(counts) - expected) < 4 * np.sqrt(expected / len(counts))
    assert "unchanged" in audit.added and f"{audit.included.sum()} of 400 canaries" in audit.added


def test_correct_dp_sgd_shows_the_declared_signal_to_noise_and_a_tenth_of_the_noise_ten_times_it() -> None:
    correct = audited_run(noise=1.0)
    t = correct.transcript()
    assert t.source == "gradients" and t.steps == EPOCHS * (N // B)
    assert np.array_equal(t.batch_rows, np.full(t.steps, B))
    assert np.array_equal(t.present.sum(axis=1), t.canary_rows) and t.canary_rows.sum() > 0
    assert not t.present[:, ~correct.included].any()
    assert 0.6 < rho(correct) < 1.4
    result = correct.result()  # the verdict's own scores, computed once, are the result's
    np.testing.assert_array_equal(result.scores, transcript_scores(t, B / N))
    assert result.verdict is not None and result.steinke is result.verdict.bound
    assert 6.0 < rho(audited_run(noise=0.1)) < 14.0


def test_a_step_that_never_calls_apply_gradients_is_observed_through_the_iterates() -> None:
    class Manual(tf.keras.Model):
        def train_step(self, data: Any) -> dict:
            x, y = data
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(self.compiled_loss(y, self(x, training=True)))
            for var, grad in zip(
                self.trainable_variables, tape.gradient(loss, self.trainable_variables), strict=True
            ):
                var.assign_sub(0.1 * grad)  # no clipping, no noise, no apply_gradients
            return {"loss": loss}

    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input((FEATURES,))
    model = Manual(inputs, tf.keras.layers.Dense(2)(tf.keras.layers.Dense(8, activation="relu")(inputs)))
    model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = data()
    audit = TrainingAuditor(canaries=40, declared=declared(), seed=0)
    model.fit(
        audit.wrap(tf.data.Dataset.from_tensor_slices((x, y)).batch(B)),
        epochs=1,
        callbacks=[audit.callback()],
        verbose=0,
    )
    t = audit.transcript()
    assert t.source == "iterates"
    assert np.all(t.probe == 0.0)  # nothing but canaries and noise moves the probe, and there is no noise


def test_no_inert_features_names_the_remedy() -> None:
    x, y = data(zero=1)
    with pytest.raises(ValueError, match="no inert place") as err:
        find_inert_features(tf.data.Dataset.from_tensor_slices((x, y)).batch(B))
    assert REMEDY in str(err.value)
    with pytest.raises(ValueError, match="BATCHED"):
        find_inert_features(tf.data.Dataset.from_tensor_slices((x, y)))


def test_misuse_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="declared=DeclaredDPSGD"):
        TrainingAuditor(canaries=10)
    audit = TrainingAuditor(canaries=10, declared=declared())
    with pytest.raises(ValueError, match="call wrap"):
        audit.callback()
    with pytest.raises(ValueError, match="exactly one of epochs and steps"):
        DeclaredDPSGD(noise_multiplier=1.0, clip_norm=1.0, batch_size=2, dataset_size=10)
    with pytest.raises(ValueError, match="batch_size=20"):
        DeclaredDPSGD(noise_multiplier=1.0, clip_norm=1.0, batch_size=20, dataset_size=10, epochs=1)


def test_runs_pool_their_canaries_and_every_runs_checks() -> None:
    from dpaudit.training_audit.runs import audit_runs, run_seed

    def train(auditor: TrainingAuditor) -> None:
        model, ds = model_and_data(noise=1.0, seed=auditor.seed % 1000)
        model.fit(auditor.wrap(ds), epochs=EPOCHS, callbacks=[auditor.callback()], verbose=0)

    verdict = audit_runs(train, declared(), runs=2, canaries=30, seed=5)
    assert verdict.runs == 2 and verdict.bound.canaries == 60
    assert sum(c.name == "steps" for c in verdict.checks) == 2
    assert run_seed(5, 0) != run_seed(5, 1) and run_seed(5, 1) == run_seed(5, 1)
    with pytest.raises(ValueError, match="did not run the audit"):
        audit_runs(lambda auditor: None, declared(), runs=1, canaries=10)


def test_the_dense_chain_shortcut_gives_the_jacobians_norms_rows_and_clipped_sums() -> None:
    from dpaudit.training_audit.pergrad import chain_functions, dense_chain, jacobian_functions

    model, _ = model_and_data(noise=1.0)
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    x, y = data(3)
    x[:, :ZERO] = np.random.default_rng(4).normal(size=(N, ZERO)) * 5.0  # canary-like rows too
    rows = tf.constant([0, 2], tf.int32)
    layers = dense_chain(model)
    assert (
        layers is not None
        and dense_chain(tf.keras.Sequential([tf.keras.Input((4, 4, 1)), tf.keras.layers.Conv2D(2, 3)]))
        is None
    )
    slow = jacobian_functions(model, loss, 0, rows, 0.5)
    fast = chain_functions(model, layers, loss, rows, 0.5)
    for a, b in zip(slow[0](x[:50], y[:50]), fast[0](x[:50], y[:50]), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
    for a, b in zip(slow[1](x[:50], y[:50]), fast[1](x[:50], y[:50]), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-5)
