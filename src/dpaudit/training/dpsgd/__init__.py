"""Instrumented DP-SGD for many trials at once (Abadi et al. 2016, Algorithm 1; Bernau et al.
§5.1–5.2; the hooks of Nasr et al. 2021 §IV).

T trials share one example set ``X`` (``[N, ...]``); a boolean membership mask ``[T, N]``
selects each trial's training set, so the neighbouring datasets D and D′ of a trial are just two
masks, and Poisson sampling (rate q) draws a random sub-mask every step. One step per trial runs
these phases (methods of :class:`_StepFunction`, in this order):

1. **batch selection** — full batch, or a Poisson sample (each member joins with probability q);
   Poisson batches are *gathered* (only the ≈ q·|D_t| sampled rows of each trial are evaluated,
   padded to the chunk's largest batch) or, for large q, evaluated as a mask over all N rows;
2. **per-example norms** — from the layer identities (:mod:`dpaudit.training.models`), never
   materialising per-example gradients of dense layers;
3. **clip-and-sum** — clip every example to ``clip_norm`` C (c_n = min(1, C/‖g_n‖)) and sum over
   the batch as matmuls; tracked rows get their clipped gradients materialised (only those few);
4. **injection** — hooks that change the privatized sum: a crafted :class:`InjectedGradient`
   (optionally per trial, from a start step, behind a world gate) and an :data:`Injector`
   callback run inside the compiled step, whose output is clipped to C and enters with the
   sampling probability q, like a record;
5. **noise** — Gaussian N(0, σ²I) per trial with σ = z·s, where the sensitivity s is
   ``sensitivity_factor``·C (global: 1·C unbounded, 2·C bounded) or the local sensitivity
   LS_i = ‖Σ_r w_r clip(g_r)‖ of the tracked records (Bernau Eqs. 19 and 21);
6. **update** — θ ← θ − η·(noisy sum)/B, B = ``normalizer`` (default: q times the trial's dataset
   size, i.e. TF Privacy's division by the number of microbatches). η = 0 is allowed (the
   malicious-dataset adversary of Nasr et al. §IV-F keeps θ fixed).

Observers are callables run inside the compiled step that map a :class:`StepState` to a few
per-trial tensors; the trainer stacks them over steps into ``TrainResult.records`` — it never
keeps gradient or weight histories (:func:`privatized_sum_observer` records the noisy sum at a few
coordinates). With ``clip_norm=None`` and ``noise_multiplier=0`` this is plain (minibatch or
full-batch) SGD.

Speed: one compiled trace serves every chunk and every call with the same model, configuration
and hooks (the seed, sizes and chunk index are tensors); :func:`select_strategy` picks trials at
once, small groups or one model at a time per model family, device and rows per step. Sums over
examples run in fixed-size blocks so that results do not depend on the number of intra-op threads.

The step's phases live in modules named after them: :mod:`.config` (what a run is given),
:mod:`.plan` (strategy, chunk layout, Poisson batch bound), :mod:`.step` (the compiled step),
:mod:`.cache` (compiled steps reused across calls), :mod:`.observers` (what hooks read and record)
and :mod:`.train` (:func:`train_trials`, the loop over chunks and step blocks).
"""

from dpaudit.training.dpsgd.config import (
    Batching,
    DPSGDConfig,
    InjectedGradient,
    NoiseScale,
    StrategyName,
    TrackedRecords,
    TrainResult,
)
from dpaudit.training.dpsgd.observers import (
    Injector,
    Observer,
    StepState,
    loss_observer,
    privatized_sum_observer,
)
from dpaudit.training.dpsgd.plan import (
    LAYOUT_KEYWORDS,
    SMALL_BATCH_CHUNK,
    SMALL_BATCH_ROWS,
    Strategy,
    chunk_layout,
    default_chunk_size,
    poisson_batch_bound,
    select_strategy,
)
from dpaudit.training.dpsgd.train import TrainingStoppedError, train_trials

__all__ = [
    "LAYOUT_KEYWORDS",
    "SMALL_BATCH_CHUNK",
    "SMALL_BATCH_ROWS",
    "Batching",
    "DPSGDConfig",
    "InjectedGradient",
    "Injector",
    "NoiseScale",
    "Observer",
    "StepState",
    "Strategy",
    "StrategyName",
    "TrackedRecords",
    "TrainResult",
    "TrainingStoppedError",
    "chunk_layout",
    "default_chunk_size",
    "loss_observer",
    "poisson_batch_bound",
    "privatized_sum_observer",
    "select_strategy",
    "train_trials",
]
