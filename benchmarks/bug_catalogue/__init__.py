"""A catalogue of realistic DP-SGD bugs written as user code, each audited by ``TrainingAuditor``.

Every entry is a module with ``NAME``, ``BUG_CLASS`` (one of :data:`CLASSES`), ``DESCRIPTION``,
``TRUE_EPSILON`` (with ``true_epsilon()`` recomputing it) and ``run(seed, epochs, canaries) -> Verdict``,
a user's training script on digits (:mod:`bug_catalogue.common`) with the documented audit lines.
The bug always lives in the user's code (loader, train step, optimizer arguments), never in dpaudit.
``benchmarks/bench_bugs.py`` runs them; ``tests/training_audit/test_bug_catalogue.py`` runs one bug and one
control.
"""

from __future__ import annotations

import importlib
from types import ModuleType

CLASSES = ("control", "noise scale", "clipping", "noise reused or skipped", "data loader", "sampling")

#: Entry modules, controls first, then by class.
ENTRIES = (
    "control_tfp_sgd",
    "control_tfp_adam",
    "control_poisson_step",
    "control_adam_step",
    "control_noise_in_optimizer",
    "control_dropout",
    "control_nested_model",
    "noise_div10",
    "noise_lowered_late",
    "noise_wrong_dataset_size",
    "noise_mean_std_on_sum",
    "clip_batch_gradient",
    "clip_raised_late",
    "clip_skip_output_layer",
    "clip_per_variable",
    "clip_norm_10_noise_for_1",
    "clip_one_microbatch",
    "noise_numpy_constant",
    "noise_fixed_seed",
    "noise_loop_rebinding",
    "noise_off_first_epoch",
    "noise_kernels_only",
    "loader_repeat_before_batch",
    "loader_extra_epoch",
    "loader_oversample_subset",
    "sampling_fixed_batches",
    "sampling_same_poisson_mask",
    "sampling_double_rate",
)


def load(name: str) -> ModuleType:
    """The entry module ``name`` (one of :data:`ENTRIES`)."""
    if name not in ENTRIES:
        raise ValueError(f"unknown entry {name!r}; entries: {', '.join(ENTRIES)}")
    module = importlib.import_module(f"{__name__}.{name}")
    if name != module.NAME or module.BUG_CLASS not in CLASSES:
        raise ValueError(f"entry {name!r} declares NAME={module.NAME!r}, BUG_CLASS={module.BUG_CLASS!r}")
    return module
