"""The stage runner: audits from params, the check stage, and the five audit stages.

Stage scripts in ``stages/`` stay thin: they parse one argument and call one function here.
:func:`run_stage` handles logging, the wall-clock log (``data/timing/<stage>.json``, read by no
stage, see :data:`dpaudit.layout.TIMING_DIR`) and turning an exception into a message that names
the stage and the input.

:func:`check_params` is the ``check`` stage (DESIGN.md, "Nothing in src/ reads params.yaml
directly"; issue 11): it validates every section of ``params.yaml`` (data, audits, every registered
experiment, sensitivity, report) before any stage does work, and writes a file of constant content
that every other stage depends on. A typo anywhere fails in seconds, and a valid change reruns only
``check`` (same output, same hash) plus the stages that really read the changed key.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpaudit.config import (
    MODEL_RECORDS_DIR,
    ParamsError,
    check_limits,
    check_names,
    from_mapping,
    load_params,
    model_records,
    require,
    section,
)
from dpaudit.experiments import get_experiment, registry
from dpaudit.experiments.base import Experiment, TrainManifest, read_manifest, write_manifest
from dpaudit.io import atomic_directory, atomic_path, handle_termination, interruption, write_json
from dpaudit.layout import CHECK_PATH, TIMING_DIR, Audit, audit_key
from dpaudit.logs import setup_logging
from dpaudit.training.shards import RunnerConfig, using

log = logging.getLogger("dpaudit.stage")

#: Content of :data:`dpaudit.layout.CHECK_PATH`; constant, so that its hash never changes.
CHECK_CONTENT = "params.yaml passed dpaudit.pipeline.check_params\n"


@dataclass(frozen=True)
class AuditEntry:
    """One entry of the ``audits`` section: which dataset and which experiment."""

    dataset: str
    experiment: str


def _audit(key: str, raw: Any, datasets: list[str], known: Mapping[str, Experiment]) -> Audit:
    """Validate one entry of ``audits``: shape, experiment, dataset and the key itself."""
    where = f"audits.{key}"
    if not isinstance(raw, Mapping):
        raise ParamsError(f"params: '{where}' must be a mapping {{dataset: …, experiment: …}}, got {raw!r}")
    entry = from_mapping(AuditEntry, raw, where)
    require(
        entry.experiment in known, f"{where}.experiment", entry.experiment, f"must be one of {list(known)}"
    )
    require(
        entry.dataset in datasets,
        f"{where}.dataset",
        entry.dataset,
        f"must also be listed in data.datasets or declared under data.custom ({datasets}) so that it "
        "is downloaded and prepared",
    )
    expected = audit_key(entry.dataset, entry.experiment)
    require(
        str(key) == expected,
        where,
        str(key),
        f"an audit's key must be <dataset>-<experiment>, here '{expected}': the stages write "
        f"results/{expected}.json and data/train/{entry.dataset}/{entry.experiment}/",
    )
    return Audit(dataset=entry.dataset, experiment=entry.experiment)


def _datasets(params: Mapping[str, Any]) -> list[str]:
    """Names an audit may use: ``data.datasets``, the user's own ``data.custom`` datasets and the
    audited models of ``target.datasets`` (each prepared as a dataset by ``target-prepare@<name>``)."""
    data = section(params, "data")
    target = params.get("target") if isinstance(params.get("target"), Mapping) else {}
    return [*(data.get("datasets") or []), *(data.get("custom") or {}), *(target.get("datasets") or {})]


def audits_from_params(params: Mapping[str, Any]) -> list[Audit]:
    """Every audit of ``params['audits']``, validated, in the file's order.

    The key of an audit must be ``<dataset>-<experiment>`` (:func:`dpaudit.layout.audit_key`): the
    stages write ``metrics/<key>.json`` and ``data/train/<dataset>/<experiment>/``, so a key that
    said anything else would name files that do not belong to it, and a key with ``/`` or ``..``
    could write outside the repository. The dataset must be listed in ``data.datasets`` (so that
    it is downloaded and prepared) and the experiment must be registered.
    """
    audits = section(params, "audits")
    datasets = _datasets(params)
    known = registry()
    return [_audit(str(key), raw, datasets, known) for key, raw in audits.items()]


def audit_from_params(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> Audit:
    """Look up audit ``name`` (e.g. ``adult-identifiability``) in ``params['audits']`` and validate it."""
    audits = section(params, "audits")
    if name not in audits:
        raise ParamsError(f"params: audit '{name}' is not listed under 'audits' (known: {', '.join(audits)})")
    datasets = _datasets(params)
    audit = _audit(name, audits[name], datasets, registry())
    return Audit(dataset=audit.dataset, experiment=audit.experiment, root=root)


def load_audit(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> tuple[Audit, Experiment, Any]:
    """The audit ``name``, its registered experiment and that experiment's validated config."""
    audit = audit_from_params(params, name, root)
    experiment = get_experiment(audit.experiment)
    return audit, experiment, experiment.config_from_params(params)


def check_params(params: Mapping[str, Any]) -> list[Audit]:
    """Validate the whole params file; raise :class:`ParamsError` naming the first bad key and value.

    Checks, in order: ``data`` (datasets known and unique, sizes; every listed dataset needs an
    evaluation set, ``eval_size >= 1``, because every audit reports utility on it), ``sensitivity``
    (a known measure for every dataset), ``report``, the section of every registered experiment that
    params.yaml has (required when an audit uses it; unknown keys, types, ranges, finite floats,
    step limits), and ``audits`` (keys, datasets, experiments; each audit's dataset has an entry under
    ``<experiment>.datasets``). Returns the validated audits.
    """
    from dpaudit.data.prepare import DataConfig
    from dpaudit.report.render import config_from_params as report_config
    from dpaudit.sensitivity.search import SensitivityConfig

    data = DataConfig.from_params(params)
    for name in data.datasets:
        sizes = data.prepare_for(name)
        require(
            sizes.eval_size >= 1,
            f"data.prepare.{name}.eval_size",
            sizes.eval_size,
            "must be >= 1: every audit measures utility (test accuracy, AUROC) on the evaluation set",
        )
    data.check_custom_files()  # the user's files: DVC digest and content, before any work
    SensitivityConfig.from_params(params)
    report_config(params)
    RunnerConfig.from_params(params)
    audits = audits_from_params(params)
    used = {a.experiment for a in audits}
    configs: dict[str, Any] = {}
    for name, experiment in registry().items():
        if name in params or name in used:
            configs[name] = experiment.config_from_params(params)
            check_inputs = getattr(experiment, "check_inputs", None)
            if check_inputs is not None:  # an experiment's own input files (e.g. target's model)
                check_inputs(configs[name])
    for audit in audits:
        datasets = getattr(configs[audit.experiment], "datasets", None)
        if datasets is not None and audit.dataset not in datasets:
            raise ParamsError(
                f"params: missing key '{audit.experiment}.datasets.{audit.dataset}' "
                f"(audit '{audit.name}' needs it; have: {', '.join(sorted(datasets))})"
            )
    return audits


def run_check(
    params: Mapping[str, Any], out_path: Path = CHECK_PATH, records_dir: Path = MODEL_RECORDS_DIR
) -> None:
    """The ``check`` stage: every name that becomes a path (:func:`check_names`), the whole file
    (:func:`check_params`), the sizes only the datasets can refuse (:func:`check_limits`) and the
    audits' Keras files; then one record per audit of its Keras file (its train stage depends on it)
    and the constant marker file that every stage depends on."""
    check_names(params)
    audits = check_params(params)
    check_limits(params, audits)
    records = model_records(params, audits)
    log.info("params valid: %d audit(s): %s", len(audits), ", ".join(a.name for a in audits) or "none")
    with atomic_directory(records_dir) as out_dir:
        for name, record in records.items():
            write_json(out_dir / f"{name}.json", record)
    with atomic_path(out_path) as tmp:
        tmp.write_text(CHECK_CONTENT)


def run_train(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> None:
    """``train@<audit>``: train into the audit's train directory and write its manifest there."""
    audit, experiment, config = load_audit(params, name, root)
    with using(RunnerConfig.from_params(params)), atomic_directory(audit.train_dir) as out_dir:
        manifest = experiment.train(config, audit, out_dir)
        if not isinstance(manifest, TrainManifest):
            raise TypeError(
                f"{experiment.name}.train returned {type(manifest).__name__}, not a TrainManifest"
            )
        write_manifest(out_dir, manifest)


def run_losses(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> None:
    """``losses@<audit>``: per-example losses of the trained models."""
    audit, experiment, config = load_audit(params, name, root)
    manifest = read_manifest(audit)
    with atomic_path(audit.losses_path) as out_path:
        experiment.losses(config, audit, manifest, out_path)


def run_attack(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> None:
    """``attack@<audit>``: the audit's adversaries."""
    audit, experiment, config = load_audit(params, name, root)
    manifest = read_manifest(audit)
    with atomic_directory(audit.attack_dir) as out_dir:
        experiment.attack(config, audit, manifest, out_dir)


def run_bounds(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> None:
    """``bounds@<audit>``: metrics, plot CSVs and the report section (with a copy of the metrics)."""
    audit, experiment, config = load_audit(params, name, root)
    manifest = read_manifest(audit)
    result = experiment.bounds(config, audit, manifest)
    section_ = experiment.section(config, audit, manifest, result)
    with (
        atomic_path(audit.results_path) as results_path,
        atomic_directory(audit.plots_dir) as plots_dir,
        atomic_directory(audit.bounds_dir) as bounds_dir,
    ):
        write_json(results_path, result.metrics)
        for file, frame in result.plots.items():
            frame.to_csv(plots_dir / file, index=False, float_format=result.csv_float_format)
        write_json(bounds_dir / audit.bounds_metrics_path.name, result.metrics)
        section_.save(bounds_dir / audit.section_path.name)


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
