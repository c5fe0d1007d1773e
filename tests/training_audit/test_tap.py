"""The tap's assumption checked: the gradient handed to apply_gradients must explain how the weights moved."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from dpaudit.training_audit import DeclaredDPSGD, TrainingAuditor  # noqa: E402
from dpaudit.training_audit.simulate import simulate_transcript  # noqa: E402
from dpaudit.training_audit.tap import (  # noqa: E402
    NAME,
    TOLERANCE,
    TapVerifier,
    current_learning_rate,
    tap_check,
)
from dpaudit.training_audit.verdict import VIOLATION  # noqa: E402

N, B, FEATURES, ZERO, CLIP, SIGMA = 120, 24, 12, 4, 1.0, 1.0
LOSS = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
K = tf.keras.optimizers

OPTIMIZERS = {
    "sgd": lambda: K.SGD(0.1),
    "sgd_schedule": lambda: K.SGD(K.schedules.ExponentialDecay(0.1, 1, 0.5)),
    "momentum": lambda: K.SGD(0.05, momentum=0.9),
    "nesterov": lambda: K.SGD(0.05, momentum=0.9, nesterov=True),
    "weight_decay": lambda: K.SGD(0.1, weight_decay=0.05),
    "global_clipnorm": lambda: K.SGD(0.1, global_clipnorm=0.5),
    "adam": lambda: K.Adam(0.01),
    "legacy_sgd_decay": lambda: K.legacy.SGD(0.1, momentum=0.5, decay=0.1),
    "legacy_adam": lambda: K.legacy.Adam(0.01),
}


def replay(optimizer: Any, noise: float, steps: int = 6) -> list[float]:
    """Mismatch per step when ``optimizer`` gets the gradient plus ``noise``·N(0, 1), the tap the gradient."""
    rng = np.random.default_rng(0)
    var = tf.Variable(rng.normal(size=(5, 3)).astype("float32"))
    _ = optimizer.iterations  # created before the verifier reads it, as install() does
    verifier = TapVerifier(optimizer, var)
    out = []
    for _ in range(steps):
        g = rng.normal(size=(5, 3)).astype("float32")
        before, lr, it = (
            var.numpy(),
            float(current_learning_rate(optimizer)),
            int(optimizer.iterations.numpy()),
        )
        optimizer.apply_gradients(
            [(tf.constant(g + noise * rng.normal(size=g.shape).astype("float32")), var)]
        )
        norm = float(np.linalg.norm(g))
        out.append(
            verifier.step(g, before, var.numpy(), lr=lr, iteration=it, kernel_norm=norm, global_norm=norm)
        )
    return out


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_the_replayed_update_is_the_optimizers_and_noise_inside_it_is_seen(name: str) -> None:
    assert max(replay(OPTIMIZERS[name](), noise=0.0)) <= TOLERANCE
    assert TapVerifier(OPTIMIZERS[name](), tf.Variable([0.0])).kind != "unknown"
    # Adam's first step is −η·sign(g) up to ε: noise that flips no sign is invisible there, not later
    first = 1 if "adam" in name else 0
    assert min(replay(OPTIMIZERS[name](), noise=0.05)[first:]) > TOLERANCE


def test_an_unknown_optimizer_is_tested_only_where_its_gradient_was_always_zero() -> None:
    verifier = TapVerifier(K.RMSprop(0.01), tf.Variable(np.zeros((2, 2), "float32")))
    zero, before = np.zeros((2, 2)), np.ones((2, 2))
    assert verifier.kind == "unknown" and "must not move" in verifier.description
    assert verifier.step(zero, before, before, lr=0.1, iteration=0, kernel_norm=0, global_norm=0) == 0.0
    assert verifier.step(zero, before, before + 0.1, lr=0.1, iteration=1, kernel_norm=0, global_norm=0) > 0.5
    g = np.ones((2, 2))
    assert np.isnan(verifier.step(g, before, before - 0.1, lr=0.1, iteration=2, kernel_norm=2, global_norm=2))


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, FEATURES)).astype("float32")
    x[:, :ZERO] = 0.0
    return x, (x[:, ZERO:].sum(axis=1) > 0).astype("int64")


class HandWritten(tf.keras.Model):
    """DP-SGD by hand; ``noise_in_step=False`` hands the clipped mean to the optimizer (Opacus style)."""

    noise_in_step = True

    def train_step(self, data: Any) -> dict:
        x, y = data
        with tf.GradientTape() as tape:
            losses = LOSS(y, self(x, training=True))
        jac = tape.jacobian(losses, self.trainable_variables)
        n = tf.shape(x)[0]
        norms = tf.sqrt(tf.add_n([tf.reduce_sum(tf.reshape(j * j, [n, -1]), 1) for j in jac]))
        factor = tf.minimum(1.0, CLIP / (norms + 1e-12))
        scale = SIGMA * CLIP if self.noise_in_step else 0.0
        grads = [
            (tf.tensordot(factor, j, axes=1) + tf.random.normal(j.shape[1:], stddev=scale)) / B for j in jac
        ]
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables, strict=True))
        return {"loss": tf.reduce_mean(losses)}


class NoisySGD(K.SGD):
    """SGD that privatizes what it is given: N(0, (σC/B)²) added inside apply_gradients."""

    def apply_gradients(self, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
        noisy = [(g + tf.random.normal(tf.shape(g), stddev=SIGMA * CLIP / B), v) for g, v in grads_and_vars]
        return super().apply_gradients(noisy, *args, **kwargs)


def audited(optimizer: Any, noise_in_step: bool, epochs: int = 2) -> TrainingAuditor:
    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input((FEATURES,))
    model = HandWritten(inputs, tf.keras.layers.Dense(2)(tf.keras.layers.Dense(8, activation="relu")(inputs)))
    model.noise_in_step = noise_in_step
    model.compile(optimizer=optimizer, loss=LOSS)
    declared = DeclaredDPSGD(
        noise_multiplier=SIGMA,
        clip_norm=CLIP,
        batch_size=B,
        dataset_size=N,
        epochs=epochs,
        sampling="shuffle",
    )
    audit = TrainingAuditor(canaries=40, declared=declared, seed=0)
    x, y = data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(B)
    model.fit(audit.wrap(ds), epochs=epochs, callbacks=[audit.callback()], verbose=0)
    return audit


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_correct_hand_written_step_passes_the_tap_check(optimizer: str) -> None:
    t = audited(K.SGD(0.1) if optimizer == "sgd" else K.Adam(0.01), noise_in_step=True).transcript()
    assert t.source == "gradients" and t.update_mismatch is not None and t.update_mismatch.shape == (t.steps,)
    assert np.all(t.update_mismatch <= TOLERANCE)
    check = tap_check(t, 0.01)
    assert check.name == NAME and check.status == "passed" and not check.rejected


def test_noise_added_inside_the_optimizer_switches_to_the_iterates_not_to_no_noise() -> None:
    audit = audited(NoisySGD(0.1), noise_in_step=False)
    t = audit.transcript()
    assert t.source == "iterates" and np.all(t.update_mismatch > TOLERANCE)
    assert float(np.median(t.probe_scale)) > 0  # the iterates carry the optimizer's noise
    check = tap_check(t, 0.01)
    assert check.rejected and check.kind == "warning" and "iterates" in check.message
    verdict = audit.verdict()
    assert verdict.status != VIOLATION
    assert not any(c.rejected for c in verdict.checks if c.name == "noise_present")
    assert not any("never received" in w for w in verdict.warnings)  # it did: the tap check says why not


def test_a_transcript_without_a_tap_is_not_applicable() -> None:
    declared = DeclaredDPSGD(
        noise_multiplier=SIGMA, clip_norm=CLIP, batch_size=B, dataset_size=N, epochs=1, sampling="shuffle"
    )
    rng = np.random.default_rng(0)
    t = simulate_transcript(declared, 10, rng.random(10) < 0.5, rng, probe_dims=4, canary_dims=8)
    check = tap_check(t, 0.01)
    assert check.status == "not applicable" and not check.rejected
    with pytest.raises(ValueError, match="level"):
        tap_check(t, 0.0)
