"""The inert-canary audit of one run: wrap the user's batches, watch every step, decide.

Glue between :mod:`dpaudit.training_audit.canaries` (design and insertion),
:mod:`dpaudit.training_audit.observer`
(the read-only taps) and :mod:`dpaudit.training_audit.verdict`;
:class:`dpaudit.training_audit.TrainingAuditor` with
``kind="inert"`` delegates here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dpaudit.training_audit.canaries import design_canaries, find_inert_features, insert_canaries
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.observer import StepObserver
from dpaudit.training_audit.transcript import Transcript, transcript_scores
from dpaudit.training_audit.verdict import Verdict, decide

__all__ = ["InertAudit"]

# Batches read to find the inert features of an endless (repeated) dataset: this many epochs' worth.
ENDLESS_EPOCHS = 2


class InertAudit:
    """One run's canaries (m, their inclusion bits) against one declaration."""

    def __init__(self, canaries: int, included: np.ndarray, declared: DeclaredDPSGD, seed: int) -> None:
        self.canaries, self.included, self.declared, self.seed = canaries, included, declared, seed
        self.observer: StepObserver | None = None
        self.added: str = ""

    def wrap(self, dataset: Any, num_classes: int | None = None) -> Any:
        """The user's batched dataset with each included canary added to each batch w.p. q."""
        import tensorflow as tf

        if self.observer is not None:
            raise ValueError("wrap() was already called: one auditor audits one run")
        probe = dataset
        if int(dataset.cardinality()) == int(tf.data.INFINITE_CARDINALITY):
            probe = dataset.take(ENDLESS_EPOCHS * self.declared.steps_per_epoch)
        features = find_inert_features(probe, num_classes)
        design = design_canaries(features, self.canaries, self.seed)
        inc = self.included
        table_x = tf.Variable(
            np.zeros((int(inc.sum()), *features.input_shape), dtype=features.x_dtype),
            trainable=False,
            name="onerun_canaries",
        )
        table_y = tf.constant(design.targets()[inc])
        self.observer = StepObserver(design, self.declared, table_x, table_y, inc)
        q = self.declared.sampling_rate
        self.added = (
            f"{int(inc.sum())} of {self.canaries} canaries, each added to each batch with probability "
            f"q={q:.4g} (about {q * inc.sum():.1f} per batch), non-zero only on input features "
            f"{features.canary.tolist()}; features {features.probe.tolist()} are the noise probe. Your "
            "batches of real records, their number and their sampling are unchanged."
        )
        return insert_canaries(dataset, table_x, table_y, q, self.seed)

    def callback(self, loss: Any = None) -> Any:
        """The Keras callback that installs the taps when ``fit`` starts and observes every step."""
        import tensorflow as tf

        observer = self._observer()

        class _InertCanaryCallback(tf.keras.callbacks.Callback):
            def on_train_begin(self, logs: dict | None = None) -> None:
                observer.install(self.model, loss)

            def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
                observer.epoch_begin()

            def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
                observer.batch_begin()

            def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
                observer.batch_end()

        return _InertCanaryCallback()

    def _observer(self) -> StepObserver:
        if self.observer is None:
            raise ValueError("call wrap() on your batched training dataset before callback() and fit()")
        return self.observer

    def transcript(self) -> Transcript:
        return self._observer().transcript()

    def scores(self) -> np.ndarray:
        """Every canary's transcript score (higher = "in")."""
        return transcript_scores(self.transcript(), self.declared.sampling_rate)

    def verdict(self, confidence: float, guess_fractions: Sequence[float]) -> Verdict:
        """The verdict on this run (:func:`dpaudit.training_audit.verdict.decide`)."""
        return decide(
            [self.transcript()],
            [self.included],
            self.declared,
            confidence=confidence,
            seed=self.seed,
            guess_fractions=guess_fractions,
        )
