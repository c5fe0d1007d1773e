"""The ``check`` stage: validate the whole params.yaml and the audits' input files before any work.

DESIGN.md, "Nothing in src/ reads params.yaml directly": :func:`check_params` validates every
section (data, audits, every registered experiment, sensitivity, report) before any stage does
work, and :func:`run_check` writes a file of constant content that every other stage depends on. A
typo anywhere fails in seconds, and a valid change reruns only ``check`` (same output, same hash)
plus the stages that really read the changed key.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpaudit.config import ParamsError, check_names, require
from dpaudit.experiments import get_experiment, registry
from dpaudit.io import atomic_directory, atomic_path, write_json
from dpaudit.layout import CHECK_PATH, MODEL_RECORDS_DIR, MODELS_DIR, Audit
from dpaudit.pipeline.audits import audits_from_params
from dpaudit.training.keras_safety import KerasImportError, check_keras_file
from dpaudit.training.shards import RunnerConfig

log = logging.getLogger("dpaudit.stage")

#: Content of :data:`dpaudit.layout.CHECK_PATH`; constant, so that its hash never changes.
CHECK_CONTENT = "params.yaml passed dpaudit.pipeline.check_params\n"


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
    from dpaudit.report.config import config_from_params as report_config
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


def _experiment_config(params: Mapping[str, Any], experiment: str) -> Any:
    return get_experiment(experiment).config_from_params(params)


def _keras_file(config: Any, dataset: str) -> str | None:
    """The ``model.keras`` path of ``<experiment>.datasets.<dataset>``, if the experiment has one."""
    entry = (getattr(config, "datasets", None) or {}).get(dataset)
    model = getattr(entry, "model", None)
    keras = model.get("keras") if isinstance(model, Mapping) else getattr(model, "keras", None)
    return None if keras is None else str(keras)


def model_records(
    params: Mapping[str, Any], audits: Any, root: Path = Path(".")
) -> dict[str, dict[str, Any]]:
    """Per audit: ``{"audit", "keras", "md5"}`` of the Keras file its model comes from (nulls if none).

    A Keras file must be a relative path under :data:`MODELS_DIR` (``models/arch.keras``), the
    directory the ``check`` stage depends on; anything else, or a path that leads out of the repository
    through a symbolic link (:func:`outside_link`), is a :class:`ParamsError` naming
    ``<experiment>.datasets.<ds>.model.keras``. The file then passes the allow-list inspection the train
    stage runs (:func:`~dpaudit.training.keras_safety.check_keras_file`: its config, read without
    TensorFlow) or is refused here, naming the key, the file and the reason.
    ``audits`` are :class:`dpaudit.layout.Audit` objects.
    """
    records: dict[str, dict[str, Any]] = {}
    configs: dict[str, Any] = {}
    for audit in audits:
        if audit.experiment not in configs:
            configs[audit.experiment] = _experiment_config(params, audit.experiment)
        keras = _keras_file(configs[audit.experiment], audit.dataset)
        md5 = None
        if keras is not None:
            key = f"{audit.experiment}.datasets.{audit.dataset}.model.keras"
            path = Path(keras)
            inside = path.parts[:1] == (MODELS_DIR.name,) and ".." not in path.parts
            require(inside, key, keras, f"must be a file under {MODELS_DIR}/ (e.g. {MODELS_DIR}/arch.keras): "
                    f"the check stage depends on that directory, so editing the file reruns this audit")
            link = outside_link(root / path, root)
            require(link is None, key, keras, f"{link}: the file must lie inside the repository")
            require((root / path).is_file(), key, keras, "file does not exist")
            try:  # the train stage's allow-list, here already: an unsafe file never waits for training
                check_keras_file(root / path)
            except KerasImportError as exc:
                raise type(exc)(f"params: '{key}' = {keras!r}: {exc}") from None
            md5 = hashlib.md5((root / path).read_bytes(), usedforsecurity=False).hexdigest()
        records[audit.name] = {"audit": audit.name, "keras": keras, "md5": md5}
        code_record = getattr(_config_module(audit.experiment), "code_record", None)
        if code_record is not None:  # the user's code the audit runs: editing it reruns this audit
            records[audit.name]["code"] = code_record(configs[audit.experiment], root)
    return records


class ModelFileError(ValueError):
    """A file or directory under ``models/`` that the check stage refuses (the message names it)."""


def _dvc_cache_dir(root: Path) -> Path | None:
    """The DVC cache directory configured for the repository at ``root`` (``cache.dir``), if any: a
    ``dvc add``-ed file is a link into it when DVC's link type is ``symlink``."""
    try:
        from dvc.config import Config

        configured = Config(str(root / ".dvc")).get("cache", {}).get("dir")
    except Exception:  # no DVC, no .dvc directory, an unreadable config: no cache to allow
        return None
    return None if configured is None else (root / ".dvc" / str(configured)).resolve()


def outside_link(path: Path, root: Path = Path(".")) -> str | None:
    """Why ``path`` leads outside the repository at ``root`` through a symbolic link, else ``None``.

    Names the first link on the way and where it points. A link into the repository, or into its
    configured DVC cache (``dvc add`` with the ``symlink`` link type), is fine."""
    repo = root.resolve()
    target = path.resolve()
    if target.is_relative_to(repo):
        return None
    cache = _dvc_cache_dir(root)
    if cache is not None and target.is_relative_to(cache):
        return None
    relative = path.relative_to(root) if path.is_relative_to(root) else path
    for depth in range(1, len(relative.parts) + 1):
        link = root / Path(*relative.parts[:depth])
        if link.is_symlink():
            where = "" if link == path else f" (on the way to {path.relative_to(root)})"
            return (f"{link.relative_to(root)} is a symbolic link to {os.readlink(link)}{where}, which "
                    f"resolves to {target}, outside the repository")
    return None


def check_models_dir(root: Path = Path(".")) -> None:
    """Refuse every file or directory under ``models/`` (and ``models/`` itself) that is a symbolic
    link resolving outside the repository, naming it and where it points.

    The check stage depends on ``models/``, so DVC and dpaudit would read (and hash) whatever such a
    link points to: a file of another project, or of the system, would become an input of the audit
    without being versioned with it. Copy the file into ``models/`` instead."""
    base = root / MODELS_DIR
    candidates = [base] if base.is_symlink() else []
    if base.is_dir():
        for dirpath, dirnames, filenames in os.walk(base):  # links to directories are listed, not entered
            candidates.extend(Path(dirpath) / name for name in sorted(dirnames + filenames))
    for path in candidates:
        if path.is_symlink():
            why = outside_link(path, root)
            if why is not None:
                raise ModelFileError(
                    f"{why}: every file under {MODELS_DIR}/ must lie inside the repository (the check stage "
                    f"depends on {MODELS_DIR}/); copy it into {MODELS_DIR}/"
                )


def _config_module(experiment: str) -> Any:
    """The config module of ``experiment`` (optional hooks: ``check_limits``, ``code_record``)."""
    return importlib.import_module(f"dpaudit.experiments.{experiment}.config")


def check_limits(params: Mapping[str, Any], audits: Any) -> None:
    """Sizes only the dataset can refuse, for every audit, before any work (each error names the key
    and the limit): an experiment's config module may define ``check_limits(config, dataset, size)``,
    called with the dataset's :class:`~dpaudit.data.custom.DatasetSize` as the prepare stage will make it."""
    from dpaudit.data.custom import dataset_size
    from dpaudit.data.prepare import DataConfig

    data = DataConfig.from_params(params)
    sizes: dict[str, Any] = {}
    for audit in audits:
        check = getattr(_config_module(audit.experiment), "check_limits", None)
        if check is None:
            continue
        if audit.dataset not in sizes:
            sizes[audit.dataset] = dataset_size(data, audit.dataset)
        if sizes[audit.dataset] is not None:
            check(_experiment_config(params, audit.experiment), audit.dataset, sizes[audit.dataset])


def validate(params: Mapping[str, Any]) -> tuple[list[Audit], dict[str, dict[str, Any]]]:
    """Every check of the ``check`` stage, writing nothing: every name that becomes a path
    (:func:`check_names`), the whole file (:func:`check_params`), the sizes only the datasets can
    refuse (:func:`check_limits`), the audits' Keras files and ``models/`` (:func:`check_models_dir`).
    Returns the audits and their Keras records (:func:`model_records`)."""
    check_names(params)
    audits = check_params(params)
    check_limits(params, audits)
    records = model_records(params, audits)
    check_models_dir()
    return audits, records


def run_validate(params: Mapping[str, Any]) -> None:
    """``check --validate-only``: :func:`validate`, writing nothing (``make run`` runs it before
    ``dvc repro``, which cannot name a bad key of an ``audits`` entry)."""
    audits, _ = validate(params)
    log.info("params.yaml valid: %d audit(s)", len(audits))


def run_check(
    params: Mapping[str, Any], out_path: Path = CHECK_PATH, records_dir: Path = MODEL_RECORDS_DIR
) -> None:
    """The ``check`` stage: :func:`validate`, then one record per audit of its Keras file (its train
    stage depends on it) and the constant marker file that every stage depends on."""
    audits, records = validate(params)
    log.info("params valid: %d audit(s): %s", len(audits), ", ".join(a.name for a in audits) or "none")
    with atomic_directory(records_dir) as out_dir:
        for name, record in records.items():
            write_json(out_dir / f"{name}.json", record)
    with atomic_path(out_path) as tmp:
        tmp.write_text(CHECK_CONTENT)
