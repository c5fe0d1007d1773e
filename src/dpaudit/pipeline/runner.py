"""Run one stage body: params loaded, duration logged, a failure turned into one clear message."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from dpaudit.config import ParamsError, load_params
from dpaudit.io import handle_termination, interruption, write_json
from dpaudit.layout import TIMING_DIR
from dpaudit.logs import setup_logging

log = logging.getLogger("dpaudit.stage")


def run_stage(
    stage: str,
    body: Callable[[dict[str, Any]], None],
    params_path: str = "params.yaml",
    write_timing: bool = True,
) -> None:
    """Run one stage body with params loaded; log its duration (and, with ``write_timing``, record it
    under :data:`~dpaudit.layout.TIMING_DIR`); exit 1 with a clear message on failure."""
    setup_logging()
    handle_termination()  # SIGTERM unwinds like Ctrl-C, so the atomic writers remove their temporaries
    started = time.perf_counter()
    try:
        params = load_params(params_path)
        body(params)
    except KeyboardInterrupt as exc:
        signame, status = interruption(exc)
        log.error("stage %s interrupted (%s); partial outputs removed", stage, signame)
        _exit(status)
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
    if write_timing:
        write_json(TIMING_DIR / f"{stage}.json", {"stage": stage, "seconds": round(seconds, 3)})


def _exit(status: int) -> None:
    """Exit with ``status``; at once (``os._exit``, after flushing) when the process abandoned a Ray
    start still under way, whose thread inside Ray's C++ core could otherwise end the interpreter's
    teardown with status 1 or an abort (:func:`dpaudit.training.ray_session.start_abandoned`)."""
    session = sys.modules.get("dpaudit.training.ray_session")  # loaded only if Ray was used
    if session is not None and session.start_abandoned():
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)
    sys.exit(status)
