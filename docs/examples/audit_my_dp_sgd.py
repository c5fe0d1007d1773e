"""A user's own DP-SGD training of a digits classifier, with a bug that is easy to write, audited in one run.

The training claims ε = 2 at δ = 1e-5 for DP-SGD with per-example clipping at C = 1. Its hand-written
step clips each example's gradient layer by layer, and the loop that does so skips the output layer
(``[:-2]``: its kernel and bias), so those gradients reach the noise unclipped. The lines marked
``# audit`` are the audit's only changes to the script. Run: ``python docs/examples/audit_my_dp_sgd.py``
(about 10 s on 2 cores); ``--fixed`` runs the correct step instead, ``--epochs N`` trains N epochs
(the declaration follows: the claim is then the PLD accountant's ε for σ = 1.61 and T = 23·N).
"""

from __future__ import annotations

import sys

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

from dpaudit.training_audit import DeclaredDPSGD, TrainingAuditor  # audit

BATCH, CLIP, NOISE = 64, 1.0, 1.61  # σ = 1.61: ε = 2 at δ = 1e-5 for q = 64/1437, T = 230 (PLD)
FIXED = "--fixed" in sys.argv
EPOCHS = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 10


class DPModel(tf.keras.Model):
    """DP-SGD by hand: per-example gradients, clipping to CLIP, Gaussian noise NOISE·CLIP, averaging."""

    def train_step(self, data: tuple) -> dict:
        x, y = data
        with tf.GradientTape() as tape:
            per_example = tf.keras.losses.sparse_categorical_crossentropy(
                y, self(x, training=True), from_logits=True
            )
        jacobians = tape.jacobian(per_example, self.trainable_variables)
        layers = jacobians if FIXED else jacobians[:-2]  # the bug: the output layer is left out of the norm
        norms = tf.sqrt(tf.add_n([tf.reduce_sum(tf.reshape(j * j, [tf.shape(x)[0], -1]), 1) for j in layers]))
        factor = tf.minimum(1.0, CLIP / (norms + 1e-12))
        grads = []
        for i, j in enumerate(jacobians):
            scale = factor if (FIXED or i < len(jacobians) - 2) else tf.ones_like(factor)
            clipped = tf.reduce_sum(j * tf.reshape(scale, [-1] + [1] * (len(j.shape) - 1)), axis=0)
            noisy = clipped + tf.random.normal(tf.shape(clipped), stddev=NOISE * CLIP)
            grads.append(noisy / tf.cast(tf.shape(x)[0], tf.float32))
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables, strict=False))
        return {"loss": tf.reduce_mean(per_example)}


def main() -> None:
    digits = load_digits()
    x, y = (digits.data / 16.0).astype("float32"), digits.target.astype("int64")
    order = np.random.default_rng(0).permutation(len(x))
    x_train, y_train = x[order[:1437]], y[order[:1437]]

    declared = DeclaredDPSGD(NOISE, CLIP, BATCH, len(x_train), epochs=EPOCHS, sampling="shuffle")  # audit
    audit = TrainingAuditor(canaries=500, declared=declared, seed=0)  # audit

    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input((64,))
    hidden = tf.keras.layers.Dense(64, activation="relu", name="hidden_1")(inputs)
    hidden = tf.keras.layers.Dense(64, activation="relu", name="hidden_2")(hidden)
    model = DPModel(inputs, tf.keras.layers.Dense(10, name="output")(hidden))
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.25),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    train_ds = (
        tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(len(x_train), seed=0).batch(BATCH)
    )
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=EPOCHS, verbose=0, callbacks=[audit.callback()])  # audit
    print(audit.verdict())  # audit


if __name__ == "__main__":
    main()
