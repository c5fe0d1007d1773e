"""Shared plumbing of the DVC stage scripts: the audits list, timing, failure messages.

Stage scripts in ``stages/`` stay thin: they parse one argument, call into the library and let
:func:`run_stage` handle logging, timing (``data/timing/<stage>.json``, read by the report's
provenance section) and turning an exception into a message that names the stage and the input.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from dpaudit.config import ParamsError, from_mapping, load_params, require, section
from dpaudit.experiments import EXPERIMENTS, Audit, experiment_module
from dpaudit.io import handle_termination, interruption, write_json
from dpaudit.logs import setup_logging

log = logging.getLogger("dpaudit.stage")

TIMING_DIR = Path("data") / "timing"


@dataclass(frozen=True)
class AuditEntry:
    """One entry of the ``audits`` section: which dataset and which experiment."""

    dataset: str
    experiment: str

    def __post_init__(self) -> None:
        require(self.experiment in EXPERIMENTS, "experiment", self.experiment, f"one of {list(EXPERIMENTS)}")


def audit_from_params(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> Audit:
    """Look up audit ``name`` (e.g. ``adult-identifiability``) in ``params['audits']`` and validate it."""
    audits = section(params, "audits")
    if name not in audits:
        raise ParamsError(f"params: audit '{name}' is not listed under 'audits' (known: {', '.join(audits)})")
    entry = from_mapping(AuditEntry, audits[name], f"audits.{name}")
    datasets = section(params, "data").get("datasets", [])
    require(
        entry.dataset in datasets,
        f"audits.{name}.dataset",
        entry.dataset,
        f"must also be listed in data.datasets {list(datasets)} so that it is downloaded and prepared",
    )
    return Audit(dataset=entry.dataset, experiment=entry.experiment, root=root)



def load_audit(params: Mapping[str, Any], name: str) -> tuple[Audit, ModuleType, Any]:
    """The audit ``name``, its experiment module and that experiment's validated config."""
    audit = audit_from_params(params, name)
    experiment = experiment_module(audit.experiment)
    return audit, experiment, experiment.config_from_params(params)

def run_stage(stage: str, body: Callable[[dict[str, Any]], None], params_path: str = "params.yaml") -> None:
    """Run one stage body with params loaded; log its duration; exit 1 with a clear message on failure."""
    setup_logging()
    handle_termination()  # SIGTERM unwinds like Ctrl-C, so the atomic writers remove their temporaries
    started = time.perf_counter()
    try:
        params = load_params(params_path)
        body(params)
    except KeyboardInterrupt as exc:
        signame, status = interruption(exc)
        log.error("stage %s interrupted (%s); partial outputs removed", stage, signame)
        sys.exit(status)
    except ParamsError as exc:
        log.error("stage %s: invalid parameters in %s: %s", stage, params_path, exc)
        sys.exit(1)
    except FileNotFoundError as exc:
        log.error("stage %s: missing input: %s", stage, exc)
        sys.exit(1)
    except Exception as exc:
        log.error(
            "stage %s failed: %s: %s (rerun with DPAUDIT_LOG_LEVEL=DEBUG for the traceback)",
            stage,
            type(exc).__name__,
            exc,
        )
        log.debug("traceback", exc_info=True)
        sys.exit(1)
    seconds = time.perf_counter() - started
    log.info("stage %s finished in %.1f s", stage, seconds)
    write_json(TIMING_DIR / f"{stage}.json", {"stage": stage, "seconds": round(seconds, 3)})
