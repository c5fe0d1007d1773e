"""The ``audits`` section of params.yaml: which dataset and experiment each audit runs.

A per-audit stage loads its one audit (:func:`load_audit`), which imports that audit's experiment
package alone; :func:`audits_from_params` (the check and the report) validates every audit and so
imports every experiment package.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpaudit import experiments
from dpaudit.config import ParamsError, from_mapping, require, section
from dpaudit.experiments import get_experiment, registry
from dpaudit.experiments.base import Experiment
from dpaudit.layout import Audit, audit_key


@dataclass(frozen=True)
class AuditEntry:
    """One entry of the ``audits`` section: which dataset and which experiment."""

    dataset: str
    experiment: str


def _audit(key: str, raw: Any, datasets: list[str], known: Collection[str], root: Path = Path(".")) -> Audit:
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
    return Audit(dataset=entry.dataset, experiment=entry.experiment, root=root)


def _datasets(params: Mapping[str, Any]) -> list[str]:
    """Names an audit may use: ``data.datasets``, the user's own ``data.custom`` datasets and the
    audited models of ``target.datasets`` (each prepared as a dataset by ``target-prepare@<name>``)."""
    data = section(params, "data")
    target = params.get("target") if isinstance(params.get("target"), Mapping) else {}
    return [*(data.get("datasets") or []), *(data.get("custom") or {}), *(target.get("datasets") or {})]


def _experiment_packages() -> list[str]:
    """The experiment packages' names, found without importing any of them."""
    return sorted(info.name for info in pkgutil.iter_modules(experiments.__path__) if info.ispkg)


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
    known = list(registry())
    return [_audit(str(key), raw, datasets, known) for key, raw in audits.items()]


def audit_from_params(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> Audit:
    """Look up audit ``name`` (e.g. ``adult-identifiability``) in ``params['audits']`` and validate it
    (without importing any experiment: the experiment must be a package of ``dpaudit.experiments``)."""
    audits = section(params, "audits")
    if name not in audits:
        raise ParamsError(f"params: audit '{name}' is not listed under 'audits' (known: {', '.join(audits)})")
    return _audit(name, audits[name], _datasets(params), _experiment_packages(), root)


def load_audit(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> tuple[Audit, Experiment, Any]:
    """The audit ``name``, its experiment (that package alone imported) and the experiment's config."""
    audit = audit_from_params(params, name, root)
    experiment = get_experiment(audit.experiment)
    return audit, experiment, experiment.config_from_params(params)
