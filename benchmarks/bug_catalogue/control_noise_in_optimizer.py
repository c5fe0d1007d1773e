"""Control: correct DP-SGD whose noise is added inside the optimizer, as Opacus does: ``train_step``
hands the clipped mean to ``apply_gradients``, which adds N(0, (σC/B)²) before the SGD update."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "control_noise_in_optimizer"
BUG_CLASS = "control"
DESCRIPTION = "hand-written clipped mean; an SGD subclass adds noise σC/B in apply_gradients (Opacus style)"
# Exactly the accounted mechanism on shuffled batches (the catalogue's claim): PLD's ε of (σ, q, T) = 2.
TRUE_EPSILON = 2.0


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma())


class NoisySGD(tf.keras.optimizers.SGD):
    """SGD that privatizes what it is given: adds N(0, (σC/B)²) to each gradient, then steps."""

    def __init__(self, noise_std: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.noise_std = noise_std

    def apply_gradients(self, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
        noisy = [(g + tf.random.normal(tf.shape(g), stddev=self.noise_std), v) for g, v in grads_and_vars]
        return super().apply_gradients(noisy, *args, **kwargs)


class MeanOnly(common.DPSGDModel):
    def privatize(self, summed: list[tf.Tensor]) -> list[tf.Tensor]:
        return [s / float(self.expected_batch) for s in summed]  # the optimizer adds the noise


def optimizer_noise_model(seed: int, sigma: float) -> Any:
    """The catalogue's model whose optimizer, not its ``train_step``, adds the Gaussian noise."""
    model = common.dp_model(seed, sigma, cls=MeanOnly)
    noise_std = sigma * common.CLIP / common.BATCH
    optimizer = NoisySGD(noise_std, learning_rate=common.LEARNING_RATE)
    model.compile(optimizer=optimizer, loss=common.per_example_loss())
    return model


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = optimizer_noise_model(seed, sigma)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
