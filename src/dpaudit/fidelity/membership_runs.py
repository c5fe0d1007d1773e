"""Run the membership experiment's own stages (train → losses → attack → bounds) in a scratch root.

Reproduction profiles of Erlingsson et al. (:data:`dpaudit.references.ERLINGSSON`) and Negoescu
et al. (:data:`dpaudit.references.NEGOESCU`) need the membership audit in a regime other than the
pipeline's: they take ``params.yaml``, deep-merge an override into its ``membership:`` and
``data.prepare`` sections, prepare the dataset into a temporary directory and call the
experiment's stage functions there, exactly as the DVC stages do (:mod:`dpaudit.pipeline`), so
nothing in the working tree is read or written besides ``params.yaml`` and the vendored raw files.
"""

from __future__ import annotations

import copy
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from dpaudit.experiments.membership.config import MembershipConfig, config_from_params
from dpaudit.table import ResultsTable

__all__ = [
    "MembershipRun",
    "clopper_pearson",
    "deep_merge",
    "override_params",
    "run_membership",
    "set_recipe",
]

PARAMS_PATH = Path("params.yaml")


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``override`` merged in: mappings recursively, anything else replaced."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def set_recipe(override: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The override as ``dvc exp run -S key=value`` arguments (dotted keys, YAML flow values)."""
    out: list[str] = []
    for key, value in override.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out += set_recipe(value, f"{dotted}.")
        else:
            flow = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
            flow = flow.removesuffix("\n...").strip()
            out.append(f"{dotted}={flow}")
    return out


def override_params(override: Mapping[str, Any], params_path: Path = PARAMS_PATH) -> dict[str, Any]:
    """``params.yaml`` with ``override`` deep-merged (validated by the membership config on use)."""
    with open(params_path, encoding="utf-8") as f:
        params = yaml.safe_load(f)
    return deep_merge(params, override)


def clopper_pearson(k: int, n: int, level: float) -> tuple[float, float]:
    """Exact two-sided binomial interval of ``k`` successes in ``n`` trials (scipy's ``binomtest``)."""
    from scipy.stats import binomtest

    if n <= 0:
        return float("nan"), float("nan")
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


@dataclass(frozen=True)
class MembershipRun:
    """What one run produced: the bounds stage's results table, strategy frame and checks, the
    config, the member count of every repeat, δ and the wall-clock seconds."""

    config: MembershipConfig
    table: ResultsTable
    frame: dict[str, list[Any]]
    checks: dict[str, int]
    context: dict[str, Any]
    manifest_sizes: dict[str, Any]
    member_counts: list[int]
    delta: float
    seconds: float

    def rows(self) -> list[dict[str, Any]]:
        """The strategy frame as one dict per strategy."""
        keys = list(self.frame)
        return [dict(zip(keys, values, strict=True)) for values in zip(*self.frame.values(), strict=True)]


def run_membership(
    dataset: str, override: Mapping[str, Any], params_path: Path = PARAMS_PATH, keep: Path | None = None
) -> MembershipRun:
    """Prepare ``dataset`` and run the membership audit's four stages on it in a temporary root.

    ``override`` is merged into the whole params mapping (e.g. ``{"membership": {...}}``); the
    stages get the validated :class:`MembershipConfig` exactly as ``train@<ds>-membership`` would.
    ``keep``: run in this (new or empty) directory instead and leave the artefacts there.
    """
    from dpaudit.data.download import download_dataset
    from dpaudit.data.prepare import DataConfig, prepare_dataset
    from dpaudit.experiments.base import write_manifest
    from dpaudit.experiments.membership import EXPERIMENT
    from dpaudit.layout import Audit
    from dpaudit.training.shards import RunnerConfig, using

    started = time.perf_counter()
    params = override_params(override, params_path)
    config = config_from_params(params)
    data_config = DataConfig.from_params(params)
    with tempfile.TemporaryDirectory(prefix=f"dpaudit-{dataset}-membership-") as tmp:
        root = Path(tmp) if keep is None else Path(keep)
        audit = Audit(dataset=dataset, experiment="membership", root=root)
        raw_dir = root / "data" / "raw" / dataset
        download_dataset(dataset, raw_dir, mirror=data_config.mirror, pool=data_config.pool_for(dataset))
        audit.prepared_path.parent.mkdir(parents=True, exist_ok=True)
        prepare_dataset(dataset, raw_dir, data_config, audit.prepared_path)
        with using(RunnerConfig.from_params(params)):
            manifest = EXPERIMENT.train(config, audit, audit.train_dir)
        write_manifest(audit.train_dir, manifest)
        audit.losses_path.parent.mkdir(parents=True, exist_ok=True)
        EXPERIMENT.losses(config, audit, manifest, audit.losses_path)
        EXPERIMENT.attack(config, audit, manifest, audit.attack_dir)
        result = EXPERIMENT.bounds(config, audit, manifest)
    return MembershipRun(
        config=config,
        table=result.table,
        frame=dict(result.context["frame"]),
        checks=dict(result.context["checks"]),
        context=dict(result.context),
        manifest_sizes=dict(manifest.sizes),
        member_counts=[int(c) for c in np.ravel(manifest.facts.get("member_counts", []))],
        delta=float(manifest.delta),
        seconds=time.perf_counter() - started,
    )
