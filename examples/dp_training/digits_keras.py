"""A user's own DP-SGD training of a Keras MLP, written to be audited by the pipeline's training audit.

The pipeline calls ``train(dataset, audit, **options)`` (params.yaml, ``training_audit.train``):
``dataset`` holds the training records (``dataset.x``, ``dataset.y``, ``dataset.num_classes``) and
``audit`` is the :class:`dpaudit.training_audit.TrainingAuditor` this function wraps its batches with
and passes the callback of (the lines marked ``# audit``). ``optimizer`` picks the DP-SGD:
``hand_written`` (default), a ``train_step`` with per-example gradients, clipping to ``clip_norm``,
Gaussian noise ``noise_multiplier``·C and averaging; or ``tf_privacy``, TF Privacy's
``DPKerasSGDOptimizer`` doing the same inside the optimizer.

``bug`` switches in one mistake that is easy to write, so that the audit can be seen to catch it:

- ``none``: correct DP-SGD;
- ``noise_div10``: the noise's standard deviation divided by 10 (the claim unchanged);
- ``unclipped_output``: the output layer is left out of the clipping (its gradients reach the noise
  unclipped; a mistake of the hand-written step only).

Three audit-only input columns, 0 in every record, are appended so that canaries have weights no real
record moves (docs/training-audit.md, "When your model has no place for canaries"): the model's
predictions do not depend on them, and the code works on any tabular or image dataset.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BUGS = ("none", "noise_div10", "unclipped_output")
OPTIMIZERS = ("hand_written", "tf_privacy")
#: Audit-only zero columns appended to every record.
AUDIT_COLUMNS = 3


def train(
    dataset: Any,
    audit: Any,
    *,
    bug: str = "none",
    optimizer: str = "hand_written",
    noise_multiplier: float = 1.61,
    clip_norm: float = 1.0,
    batch_size: int = 64,
    epochs: int = 10,
    learning_rate: float = 0.25,
    hidden: int = 64,
    seed: int = 0,
) -> Any:
    """Train the MLP with DP-SGD on ``dataset`` under ``audit``; returns the trained model."""
    import tensorflow as tf

    if bug not in BUGS:
        raise ValueError(f"bug must be one of {BUGS}, got {bug!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    if optimizer == "tf_privacy" and bug == "unclipped_output":
        raise ValueError("bug unclipped_output is a mistake of the hand-written step, not of tf_privacy")
    x = np.asarray(dataset.x, np.float32).reshape(len(dataset.x), -1)
    x = np.hstack([x, np.zeros((len(x), AUDIT_COLUMNS), np.float32)])
    y = np.asarray(dataset.y, np.int64)
    noise = noise_multiplier * clip_norm / (10.0 if bug == "noise_div10" else 1.0)
    clip_all = bug != "unclipped_output"

    class DPModel(tf.keras.Model):
        def train_step(self, data: tuple) -> dict:
            xb, yb = data
            with tf.GradientTape() as tape:
                per_example = tf.keras.losses.sparse_categorical_crossentropy(
                    yb, self(xb, training=True), from_logits=True
                )
            jacobians = tape.jacobian(per_example, self.trainable_variables)
            clipped_layers = jacobians if clip_all else jacobians[:-2]
            n = tf.shape(xb)[0]
            norms = tf.sqrt(tf.add_n([tf.reduce_sum(tf.reshape(j * j, [n, -1]), 1) for j in clipped_layers]))
            factor = tf.minimum(1.0, clip_norm / (norms + 1e-12))
            grads = []
            for i, j in enumerate(jacobians):
                scale = factor if (clip_all or i < len(jacobians) - 2) else tf.ones_like(factor)
                summed = tf.reduce_sum(j * tf.reshape(scale, [-1] + [1] * (len(j.shape) - 1)), axis=0)
                noisy = summed + tf.random.normal(tf.shape(summed), stddev=noise)
                grads.append(noisy / tf.cast(n, tf.float32))
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables, strict=False))
            return {"loss": tf.reduce_mean(per_example)}

    tf.keras.utils.set_random_seed(seed)
    inputs = tf.keras.Input((x.shape[1],))
    h = tf.keras.layers.Dense(hidden, activation="relu", name="hidden_1")(inputs)
    outputs = tf.keras.layers.Dense(int(dataset.num_classes), name="output")(h)
    if optimizer == "tf_privacy":
        from tensorflow_privacy import DPKerasSGDOptimizer

        model = tf.keras.Model(inputs, outputs)
        dp_sgd = DPKerasSGDOptimizer(
            l2_norm_clip=clip_norm, noise_multiplier=noise / clip_norm, learning_rate=learning_rate
        )  # per-example losses (reduction none): TF Privacy clips each example's gradient
        loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        model.compile(optimizer=dp_sgd, loss=loss)
    else:
        model = DPModel(inputs, outputs)
        model.compile(
            optimizer=tf.keras.optimizers.SGD(learning_rate),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    train_ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=seed).batch(batch_size)
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return model
