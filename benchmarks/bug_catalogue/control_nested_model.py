"""Control: the tutorials' structure: a ``keras.Model`` subclass that holds the network (a
``Sequential``) as an attribute and overrides ``train_step`` with correct DP-SGD."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "control_nested_model"
BUG_CLASS = "control"
DESCRIPTION = "Model subclass holding a Sequential as an attribute, its own correct DP-SGD train_step"
# Exactly the accounted mechanism on shuffled batches (the catalogue's claim): PLD's ε of (σ, q, T) = 2.
TRUE_EPSILON = 2.0


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma())


class DPWrapper(tf.keras.Model):
    """The network lives in ``self.net``; ``call`` delegates to it (the subclassing guide's pattern).

    Its DP-SGD step is the catalogue's correct one, borrowed method by method: subclassing
    ``DPSGDModel`` would not do, because Keras rebases that class onto ``Functional`` in a process
    that has already built a functional ``DPSGDModel`` (the other entries' ``mlp``)."""

    l2_norm_clip: float = common.CLIP
    noise_multiplier: float = 1.0
    expected_batch: int = common.BATCH
    per_example_gradients = common.DPSGDModel.per_example_gradients
    global_norms = common.DPSGDModel.global_norms
    clip = common.DPSGDModel.clip
    noise = common.DPSGDModel.noise
    privatize = common.DPSGDModel.privatize
    train_step = common.DPSGDModel.train_step

    def __init__(self, net: tf.keras.Model, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.net = net

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        return self.net(x, training=training)


def nested_model(seed: int, sigma: float) -> Any:
    """The catalogue's MLP as a Sequential, wrapped in a subclass whose train_step is DP-SGD."""
    tf.keras.utils.set_random_seed(seed)
    net = tf.keras.Sequential(
        [
            tf.keras.Input((64,)),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    model = DPWrapper(net=net)
    return common.compile_dp(model, sigma)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = nested_model(seed, sigma)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
