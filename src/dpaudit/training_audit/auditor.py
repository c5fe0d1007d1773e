"""The training auditor (Keras-native): canaries through the user's own DP-SGD, a verdict against the claim.

Steinke, Nasr & Jagielski 2023 and Mahloujifar, Melis & Chaudhuri 2024: the audit draws, from its own
seed and before training, which of m canaries are included (independently, probability 1/2), lets
them take part in one ordinary training run and turns what it saw into evidence. Three kinds:

* ``kind="inert"`` (default; needs ``declared``, a :class:`DeclaredDPSGD`): input canaries on features
  that are zero in every real record (:mod:`dpaudit.training_audit.canaries`). :meth:`TrainingAuditor.wrap`
  adds each included canary to each of the user's batches with probability q, so the user's own
  per-example gradients, clipping, noise and averaging act on it; the callback observes every step
  (:mod:`dpaudit.training_audit.observer`, read-only) and :meth:`TrainingAuditor.verdict` says whether a
  violation is proven, the code does not match its declaration, or nothing was found and what the
  audit could have detected (:mod:`dpaudit.training_audit.verdict`).
* ``kind="input"`` (black box): mislabeled copies of real inputs (``canary_inputs="mislabeled"``)
  or uniform-noise inputs with random labels (``"ood"``) mixed into the records and scored by the
  trained model's loss. Weak at ordinary training lengths; kept for models audited as black boxes.
* ``kind="gradient"``: a NOISE-CALIBRATION PROBE, not an audit of clipping. The harness hooks
  ``apply_gradients`` and adds C·e_{c_j}/n_t for each included canary sampled at rate q AFTER the
  user's clipping and averaging, so it measures the noise the code adds and is blind to clipping
  bugs by construction. Score = θ_initial − θ_final at c_j.

Works with TF Privacy's ``DPKerasSGDOptimizer``, ``DPKerasAdamOptimizer``, ``DPSequential`` and a
hand-written ``train_step``. Gradient accumulation is not supported by the gradient probe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpaudit.bounds.onerun import DEFAULT_GUESS_FRACTIONS, OneRunAudit, audit_one_run
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.inert import InertAudit
from dpaudit.training_audit.observer import per_example_loss
from dpaudit.training_audit.transcript import Transcript
from dpaudit.training_audit.verdict import Verdict

__all__ = ["KINDS", "TrainingAuditor", "OneRunResult"]

KINDS = ("inert", "input", "gradient")
CANARY_INPUTS = ("mislabeled", "ood")
# Records read into the shuffle buffer when the dataset's size is unknown.
SHUFFLE_BUFFER = 100_000


@dataclass(frozen=True)
class OneRunResult:
    """Both analyses of one audited run. ``headline`` is the assumption-free one (``steinke``)."""

    kind: str
    canaries: int
    included: int
    steinke: OneRunAudit
    fdp_gaussian: OneRunAudit
    scores: np.ndarray
    included_mask: np.ndarray
    verdict: Verdict | None = None

    @property
    def headline(self) -> OneRunAudit:
        return self.steinke

    def as_dict(self) -> dict[str, Any]:
        return {
            **({"verdict": self.verdict.as_dict()} if self.verdict is not None else {}),
            "kind": self.kind,
            "canaries": self.canaries,
            "included": self.included,
            **{
                a.estimator: {
                    "epsilon_lower": a.epsilon_lower,
                    "assumption": a.assumption,
                    "confidence": a.confidence,
                    "guesses": a.guesses,
                    "correct": a.correct,
                }
                for a in (self.steinke, self.fdp_gaussian)
            },
        }


class TrainingAuditor:
    """Audit one Keras DP training run with m canaries (see the module docstring).

    ``declared``: the DP-SGD the code claims to run (required for ``kind="inert"``, optional for the
    others; then δ comes from it and ``verdict()`` compares the ε lower bound with its claim).
    ``sampling_rate`` (gradient canaries only): the probability with which each included canary
    takes part in a step — set it to the records' rate (batch size / dataset size) so that a canary
    is audited under the same mechanism as a record. ``clip_norm``: C; read from the DP optimizer
    or ``DPSequential`` when not given.
    """

    def __init__(
        self,
        canaries: int = 500,
        *,
        kind: str = "inert",
        declared: DeclaredDPSGD | None = None,
        loss: Any = None,
        seed: int = 0,
        delta: float = 1e-5,
        confidence: float = 0.95,
        canary_inputs: str = "mislabeled",
        num_classes: int | None = None,
        sampling_rate: float | None = None,
        clip_norm: float | None = None,
        coordinates: Sequence[tuple[int, int]] | None = None,
        guess_fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if canary_inputs not in CANARY_INPUTS:
            raise ValueError(f"canary_inputs must be one of {CANARY_INPUTS}, got {canary_inputs!r}")
        if int(canaries) < 2:
            raise ValueError(f"canaries must be >= 2, got {canaries!r}")
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        if kind == "inert" and declared is None:
            raise ValueError(
                "kind='inert' audits a claim: pass declared=DeclaredDPSGD(...) (σ, C, B, N, epochs, δ)"
            )
        if declared is not None:
            delta = declared.delta
            sampling_rate = declared.sampling_rate if sampling_rate is None else sampling_rate
            clip_norm = declared.clip_norm if clip_norm is None else clip_norm
        if sampling_rate is not None and not 0.0 < sampling_rate <= 1.0:
            raise ValueError(f"sampling_rate must lie in (0, 1], got {sampling_rate!r}")
        if clip_norm is not None and not clip_norm > 0:
            raise ValueError(f"clip_norm must be > 0, got {clip_norm!r}")
        self.canaries, self.kind, self.seed = int(canaries), kind, int(seed)
        self.delta, self.confidence = float(delta), float(confidence)
        self.canary_inputs, self.num_classes = canary_inputs, num_classes
        self.sampling_rate, self.clip_norm = sampling_rate, clip_norm
        self.guess_fractions = tuple(guess_fractions)
        self._coordinates = None if coordinates is None else [tuple(map(int, c)) for c in coordinates]
        # The inclusion bits: the audit's own randomness, drawn before training (the theorems need it).
        self.included = np.random.default_rng([self.seed, 0]).random(self.canaries) < 0.5
        self._canary_x: np.ndarray | None = None
        self._canary_y: np.ndarray | None = None
        self._initial: np.ndarray | None = None
        self.declared, self._loss = declared, loss
        self._inert = (
            InertAudit(self.canaries, self.included, declared, self.seed) if kind == "inert" else None
        )

    # ------------------------------------------------------------------------------ input canaries

    def wrap(self, dataset: Any) -> Any:
        """Return ``dataset`` with the included input canaries mixed in as ordinary records.

        ``dataset`` yields ``(x, y)`` records, or batches of them (a leading unknown dimension):
        batches are unbatched, mixed, shuffled (seeded from the audit) and rebatched to the first
        batch's size. Labels are integer classes or one-hot vectors. Canary sources are the first
        m records' inputs; a mislabeled canary gets a different class, drawn from the audit seed.
        """
        import tensorflow as tf

        if self._inert is not None:
            return self._inert.wrap(dataset, self.num_classes)
        if self.kind != "input":
            raise ValueError("wrap() mixes input canaries; kind='gradient' needs only callback()")
        spec = dataset.element_spec
        if not (isinstance(spec, tuple) and len(spec) == 2):
            raise ValueError("wrap() needs a dataset of (x, y) pairs")
        batched = spec[0].shape.rank is not None and spec[0].shape.rank >= 1 and spec[0].shape[0] is None
        batch_size = None
        records = dataset
        if batched:
            first = next(iter(dataset))
            batch_size = int(tf.shape(first[0])[0])
            records = dataset.unbatch()
        xs, ys = [], []
        for x, y in records.take(self.canaries):
            xs.append(x.numpy())
            ys.append(y.numpy())
        if len(xs) < self.canaries:
            raise ValueError(f"the dataset has {len(xs)} records, fewer than canaries={self.canaries}")
        x_src, y_src = np.stack(xs), np.stack(ys)
        one_hot = y_src.ndim == 2
        classes = self.num_classes or (y_src.shape[1] if one_hot else int(y_src.max()) + 1)
        if classes < 2:
            raise ValueError("input canaries need at least 2 classes; pass num_classes")
        rng = np.random.default_rng([self.seed, 1])
        true = y_src.argmax(axis=1) if one_hot else y_src.astype(np.int64)
        if self.canary_inputs == "mislabeled":
            canary_x = x_src
            labels = (true + rng.integers(1, classes, size=self.canaries)) % classes
        else:
            lo, hi = float(x_src.min()), float(x_src.max())
            canary_x = rng.uniform(lo, hi, size=x_src.shape).astype(x_src.dtype)
            labels = rng.integers(0, classes, size=self.canaries)
        canary_y = np.eye(classes, dtype=y_src.dtype)[labels] if one_hot else labels.astype(y_src.dtype)
        self._canary_x, self._canary_y = canary_x, canary_y
        inc = self.included
        mixed = records.concatenate(tf.data.Dataset.from_tensor_slices((canary_x[inc], canary_y[inc])))
        size = int(mixed.cardinality())
        buffer = size if size > 0 else SHUFFLE_BUFFER
        mixed = mixed.shuffle(buffer, seed=self.seed, reshuffle_each_iteration=True)
        return mixed.batch(batch_size) if batched else mixed

    # --------------------------------------------------------------------------- gradient canaries

    def callback(self) -> Any:
        """A Keras callback: records θ_initial and, for gradient canaries, installs the hook."""
        import tensorflow as tf

        auditor = self

        if self._inert is not None:
            return self._inert.callback(self._loss)

        class _OneRunCallback(tf.keras.callbacks.Callback):
            def on_train_begin(self, logs: dict | None = None) -> None:
                auditor._install(self.model)

        return _OneRunCallback()

    def _coordinates_for(self, variables: list[Any]) -> list[tuple[int, int]]:
        if self._coordinates is not None:
            coords = self._coordinates
            if len(coords) != self.canaries or len(set(coords)) != self.canaries:
                raise ValueError(f"coordinates must be {self.canaries} distinct (variable, index) pairs")
            for v, i in coords:
                if not (0 <= v < len(variables) and 0 <= i < int(np.prod(variables[v].shape))):
                    raise ValueError(f"coordinate ({v}, {i}) is outside the model's trainable variables")
            return coords
        sizes = [int(np.prod(v.shape)) for v in variables]
        largest = int(np.argmax(sizes))
        if sizes[largest] < self.canaries:
            raise ValueError(
                f"the largest trainable variable has {sizes[largest]} entries, fewer than "
                f"canaries={self.canaries}; pass coordinates"
            )
        picks = np.random.default_rng([self.seed, 2]).choice(sizes[largest], self.canaries, replace=False)
        return [(largest, int(i)) for i in picks]

    def _install(self, model: Any) -> None:
        """Record θ_initial and hook the step, once: later ``fit`` calls keep the first hook."""
        variables = list(model.trainable_variables)
        if self.kind == "input" or self._initial is not None:
            return
        import tensorflow as tf

        coords = self._coordinates_for(variables)
        self._coords = coords
        self._initial = np.array([variables[v].numpy().ravel()[i] for v, i in coords])
        optimizer = model.optimizer
        if getattr(optimizer, "gradient_accumulation_steps", 1) > 1:
            raise ValueError("gradient canaries do not support gradient_accumulation_steps > 1")
        clip = self.clip_norm or getattr(model, "_l2_norm_clip", None)
        clip = clip or getattr(getattr(optimizer, "_dp_sum_query", None), "_l2_norm_clip", None)
        if clip is None:
            raise ValueError("no clip norm found on the model or its optimizer; pass clip_norm")
        if self.sampling_rate is None:
            raise ValueError("gradient canaries need sampling_rate (batch size / dataset size)")
        microbatches = getattr(model, "_num_microbatches", None)
        microbatches = microbatches or getattr(optimizer, "_num_microbatches", None)
        unscaled = _sums_without_division(model)
        q, seed = float(self.sampling_rate), self.seed
        inc = self.included
        per_var: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for var_index in sorted({v for v, _ in coords}):
            mine = [(j, i) for j, (v, i) in enumerate(coords) if v == var_index and inc[j]]
            per_var[var_index] = (
                np.array([j for j, _ in mine], dtype=np.int32),
                np.array([[i] for _, i in mine], dtype=np.int64).reshape(-1, 1),
            )
        targets = {id(variables[v]): v for v in per_var}
        divisor = tf.Variable(1.0, trainable=False, dtype=tf.float32, name="onerun_divisor")
        step = tf.Variable(0, trainable=False, dtype=tf.int64, name="onerun_step")
        self._hook_state = (divisor, step)

        original_step = model.train_step

        def train_step(data: Any) -> Any:
            x, y, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
            n = 1 if unscaled else microbatches or tf.shape(tf.nest.flatten(y if y is not None else x)[0])[0]
            divisor.assign(tf.cast(n, tf.float32))
            return original_step(data)

        original_apply = optimizer.apply_gradients

        def apply_gradients(grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            pairs = list(grads_and_vars)
            key = tf.stack([tf.constant(seed, tf.int64), step])
            sampled = tf.random.stateless_uniform([self.canaries], seed=key)
            sampled = tf.cast(sampled < q, tf.float32)
            out = []
            for grad, var in pairs:
                v = targets.get(id(var))
                if v is not None and grad is not None and per_var[v][0].size:
                    canary_ids, flat_idx = per_var[v]
                    updates = tf.gather(sampled, canary_ids) * (float(clip) / divisor)
                    dirac = tf.scatter_nd(flat_idx, updates, [int(np.prod(var.shape))])
                    grad = grad + tf.cast(tf.reshape(dirac, var.shape), grad.dtype)
                out.append((grad, var))
            step.assign_add(1)
            return original_apply(out, *args, **kwargs)

        model.train_step = train_step
        optimizer.apply_gradients = apply_gradients
        model.make_train_function(force=True)

    # ------------------------------------------------------------------------------------- result

    def scores(self, model: Any) -> np.ndarray:
        """One score per canary, higher = "in": −loss (input) or θ_initial − θ_final (gradient)."""
        if self._inert is not None:
            return self._inert.scores()
        if self.kind == "gradient":
            if self._initial is None:
                raise ValueError("callback() was not passed to fit(): no initial parameters recorded")
            variables = list(model.trainable_variables)
            final = np.array([variables[v].numpy().ravel()[i] for v, i in self._coords])
            return self._initial - final
        if self._canary_x is None:
            raise ValueError("wrap() was not called: no input canaries to score")
        loss = per_example_loss(model)
        values = []
        for start in range(0, self.canaries, 256):
            x = self._canary_x[start : start + 256]
            y = self._canary_y[start : start + 256]
            values.append(np.asarray(loss(y, model(x, training=False))).reshape(len(x), -1).mean(axis=1))
        return -np.concatenate(values)

    @property
    def added(self) -> str:
        """What :meth:`wrap` added to the user's data (inert canaries; empty before ``wrap``)."""
        return self._inert.added if self._inert is not None else ""

    def transcript(self) -> Transcript:
        """What the callback observed at every step (``kind="inert"``;
        :mod:`dpaudit.training_audit.transcript`)."""
        if self._inert is None:
            raise ValueError("only kind='inert' observes every step")
        return self._inert.transcript()

    def verdict(self) -> Verdict:
        """The verdict against the declared claim (see :mod:`dpaudit.training_audit.verdict`), at
        ``confidence``
        jointly; only ``kind="inert"`` observes enough of the run to give one."""
        if self._inert is None:
            raise ValueError(
                "a verdict needs kind='inert' (canaries through your clipping, every step observed)"
            )
        return self._inert.verdict(self.confidence, self.guess_fractions)

    def result(self, model: Any = None) -> OneRunResult:
        """Score the canaries and run both analyses (each at ``confidence``, joint over its grid);
        with a declaration, the verdict too."""
        if self._inert is not None:
            verdict = self.verdict()
            fdp = audit_one_run(
                verdict.scores,
                self.included,
                delta=self.delta,
                confidence=verdict.bound.confidence,
                analysis="fdp_gaussian",
                seed=self.seed,
                guess_fractions=self.guess_fractions,
            )
            included = int(self.included.sum())
            return OneRunResult(
                self.kind,
                self.canaries,
                included,
                verdict.bound,
                fdp,
                verdict.scores,
                self.included.copy(),
                verdict,
            )
        if model is None:
            raise ValueError("result() needs the trained model for this kind of canaries")
        s = self.scores(model)
        s = np.where(np.isfinite(s), s, np.where(s > 0, 1e300, -1e300))
        audits = {
            a: audit_one_run(
                s,
                self.included,
                delta=self.delta,
                confidence=self.confidence,
                analysis=a,
                seed=self.seed,
                guess_fractions=self.guess_fractions,
            )
            for a in ("steinke", "fdp_gaussian")
        }
        return OneRunResult(
            self.kind,
            self.canaries,
            int(self.included.sum()),
            audits["steinke"],
            audits["fdp_gaussian"],
            s,
            self.included.copy(),
        )


def _sums_without_division(model: Any) -> bool:
    """Whether the privatized gradient reaching ``apply_gradients`` is a SUM, not a mean.

    TF Privacy's Keras optimizers and DPSequential's per-example path always divide the noised sum
    by the number of microbatches. DPSequential's fast path divides only when the model's loss
    reduction is a mean (``SUM_OVER_BATCH_SIZE`` or ``AUTO``), as its noise scale does.
    """
    if not getattr(model, "_enable_fast_peg_computation", False):
        return False
    reduction = getattr(model.loss, "reduction", "auto")
    return reduction not in ("sum_over_batch_size", "auto")
