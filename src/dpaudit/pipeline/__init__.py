"""The stage runner: audits from params, the check stage, and the five audit stages.

Stage scripts in ``stages/`` stay thin: they parse one argument and call one function of a
submodule here, so that each stage imports only the code it runs (``dvc.yaml`` lists exactly those
files, :mod:`dpaudit.deps`):

- :mod:`.runner`: :func:`run_stage`, logging, the wall-clock log (``data/timing/<stage>.json``, read
  by no stage, see :data:`dpaudit.layout.TIMING_DIR`) and turning an exception into a message that
  names the stage and the input;
- :mod:`.audits`: the ``audits`` section (:func:`audit_from_params`, :func:`audits_from_params`,
  :func:`load_audit`);
- :mod:`.check`: the ``check`` stage (:func:`check_params`, :func:`run_check`, :func:`run_validate`);
- :mod:`.train`: ``train@<audit>``; :mod:`.stages`: ``losses``, ``attack`` and ``bounds``.

The names below are importable from ``dpaudit.pipeline`` itself; each is loaded from its submodule
on first use (:data:`_LAZY`), so importing the package loads nothing else.
"""

from __future__ import annotations

from dpaudit.lazy import lazy_exports

#: Where each public name lives (read by :mod:`dpaudit.deps` too, to follow these imports).
_LAZY: dict[str, str] = {
    "run_stage": "dpaudit.pipeline.runner",
    "AuditEntry": "dpaudit.pipeline.audits",
    "audit_from_params": "dpaudit.pipeline.audits",
    "audits_from_params": "dpaudit.pipeline.audits",
    "load_audit": "dpaudit.pipeline.audits",
    "CHECK_CONTENT": "dpaudit.pipeline.check",
    "check_params": "dpaudit.pipeline.check",
    "run_check": "dpaudit.pipeline.check",
    "run_validate": "dpaudit.pipeline.check",
    "validate": "dpaudit.pipeline.check",
    "run_train": "dpaudit.pipeline.train",
    "run_losses": "dpaudit.pipeline.stages",
    "run_attack": "dpaudit.pipeline.stages",
    "run_bounds": "dpaudit.pipeline.stages",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
