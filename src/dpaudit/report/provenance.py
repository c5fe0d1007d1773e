"""The report's provenance: commit, dataset files and licences, parameters, package versions, run times.

Everything here is read from declared inputs of the report stage (``data/raw/``, ``params.yaml``,
the sections' recorded train times) or from the environment that renders the page (git, installed
packages), so a reader can tell exactly which code, data and settings produced the numbers above.
"""

from __future__ import annotations

import html
import importlib.metadata
import logging
import os
import platform
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpaudit.data.download import file_facts
from dpaudit.io import read_json
from dpaudit.layout import DOWNLOAD_MANIFEST_NAME as MANIFEST_NAME
from dpaudit.report.html import html_table
from dpaudit.report.inputs import LoadedSection

logger = logging.getLogger(__name__)

STAGE_ORDER = ("download", "prepare", "sensitivity", "train", "losses", "attack", "bounds", "report")
PACKAGES = (
    "dpaudit",
    "tensorflow",
    "tensorflow-privacy",
    "dp-accounting",
    "dvc",
    "numpy",
    "scikit-learn",
    "xgboost",
    "scipy",
    "pandas",
    "matplotlib",
)


def _registry() -> Mapping[str, Any]:
    """``dpaudit.data.registry.DATASETS`` when that module is importable, else an empty mapping."""
    try:
        from dpaudit.data.registry import DATASETS
    except ImportError as exc:
        logger.warning("dataset registry unavailable, digests are listed unchecked: %s", exc)
        return {}
    return DATASETS


def _registry_check(facts: Mapping[str, str | int], expected: Mapping[str, str | int] | None) -> str:
    if not expected:
        return "not in registry"
    wrong = [
        f"{key} {facts.get(key)} ≠ {value}" for key, value in expected.items() if facts.get(key) != value
    ]
    if wrong:
        return "MISMATCH: " + "; ".join(wrong)
    return "matches registry (" + ", ".join(expected) + ")"


@dataclass(frozen=True)
class DatasetFile:
    """One file under ``data/raw/<dataset>/`` with its digest and its check against the registry."""

    dataset: str
    path: str
    size: int
    sha256: str
    check: str
    source: str


def dataset_files(root: Path) -> list[DatasetFile]:
    """Every file under ``data/raw/<dataset>/`` but the download manifest, checked against the registry."""
    raw = root / "data" / "raw"
    if not raw.is_dir():
        return []
    registry = _registry()
    rows = []
    for path in sorted(p for p in raw.rglob("*") if p.is_file() and not p.name.startswith(".")):
        dataset = path.relative_to(raw).parts[0]
        if path.name == MANIFEST_NAME:
            continue
        spec = registry.get(dataset)
        file_spec = next((f for f in getattr(spec, "files", ()) if f.name == path.name), None)
        facts = file_facts(path)
        expected = file_spec.expected() if file_spec is not None else None
        source = ""
        if file_spec is not None:
            source = file_spec.urls[0] if file_spec.urls else file_spec.origin
        rows.append(
            DatasetFile(
                dataset,
                str(path.relative_to(root)),
                int(facts["size"]),
                str(facts["sha256"]),
                _registry_check(facts, expected),
                source,
            )
        )
    return rows


def dataset_notes(root: Path) -> list[tuple[str, str, str, str]]:
    """(dataset, licence, homepage, note) for every ``data/raw/<dataset>/`` directory."""
    raw = root / "data" / "raw"
    if not raw.is_dir():
        return []
    registry = _registry()
    rows = []
    for directory in sorted(p for p in raw.iterdir() if p.is_dir()):
        spec = registry.get(directory.name)
        note = ""
        manifest = directory / MANIFEST_NAME
        if manifest.is_file():
            try:
                note = str(read_json(manifest).get("note", ""))
            except (ValueError, AttributeError) as exc:
                logger.warning("unreadable manifest %s: %s", manifest, exc)
        rows.append(
            (directory.name, getattr(spec, "license", "not in registry"), getattr(spec, "homepage", ""), note)
        )
    return rows


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str]:
    """Installed version of each distribution (``"not installed"`` when absent), plus Python's."""
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit(root: Path) -> str | None:
    """``HEAD``'s commit id (with ``+ uncommitted changes`` when the tree is dirty), or None outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=20
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = head.stdout.strip()
    return commit + (" + uncommitted changes" if status.returncode == 0 and status.stdout.strip() else "")


def stage_timings(sections: Sequence[LoadedSection]) -> list[tuple[str, float]]:
    """(stage, seconds) that the sections record (e.g. ``train@adult-membership`` from the train manifest).

    Only times that are facts of the rendered results are shown: they travel with the outputs the
    report stage declares as inputs. The per-stage log under ``data/timing/`` is not read.
    """
    timings: dict[str, float] = {}
    for loaded in sections:
        for stage, seconds in loaded.section.timings.items():
            timings[f"{stage}@{loaded.audit}"] = float(seconds)

    def order(stage: str) -> tuple[int, str]:
        family = stage.split("@", 1)[0]
        return (STAGE_ORDER.index(family) if family in STAGE_ORDER else len(STAGE_ORDER), stage)

    return sorted(timings.items(), key=lambda item: order(item[0]))


def kernel_library(env: Mapping[str, str] | None = None, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """Which CPU kernels TensorFlow runs here: oneDNN or Eigen. They sum in other orders, so models
    trained under one differ from the other's in their last bits (docs/pipeline.md, reruns)."""
    env = os.environ if env is None else env
    chosen = env.get("TF_ENABLE_ONEDNN_OPTS")
    if chosen in ("0", "1"):
        return f"{'oneDNN' if chosen == '1' else 'Eigen'} (TF_ENABLE_ONEDNN_OPTS={chosen})"
    try:
        avx512 = " avx512f" in cpuinfo.read_text()
    except OSError:
        return "TensorFlow's default for this CPU (CPU flags unreadable)"
    return "oneDNN (TensorFlow's default on an AVX-512 CPU)" if avx512 else "Eigen (no AVX-512 on this CPU)"


def provenance_html(root: Path, sections: Sequence[LoadedSection]) -> str:
    parts = ['<section id="provenance"><h2>Provenance</h2>']
    commit = git_commit(root)
    parts.append(
        f"<p>Git commit: <code>{html.escape(commit) if commit else 'not a git repository'}</code></p>"
    )
    notes = dataset_notes(root)
    files = dataset_files(root)
    parts.append("<h3>Datasets</h3>")
    if notes:
        parts.append(html_table(["dataset", "licence", "homepage", "note"], notes))
        parts.append(
            html_table(
                ["dataset", "file", "bytes", "sha256", "check", "source"],
                [[f.dataset, f.path, f.size, f.sha256, f.check, f.source] for f in files],
            )
        )
    else:
        parts.append('<p class="muted">No downloaded datasets under data/raw/.</p>')
    params_path = root / "params.yaml"
    parts.append("<h3>Parameters (params.yaml)</h3>")
    if params_path.is_file():
        parts.append(f"<pre>{html.escape(params_path.read_text())}</pre>")
    else:
        parts.append('<p class="muted">No params.yaml found.</p>')
    parts.append("<h3>Package versions</h3>")
    parts.append(html_table(["package", "version"], list(package_versions().items())))
    parts.append(
        f"<p>CPU kernels: {html.escape(kernel_library())}. The same commit, parameters and kernel library "
        "reproduce every number bit for bit; another kernel library or CPU changes models in their last "
        "bits, so versioned numbers are written at 3 significant digits (accountants at 6); a model trained "
        "long without noise can move further, within its sampling error (docs/pipeline.md).</p>"
    )
    timings = stage_timings(sections)
    parts.append("<h3>Run time per stage</h3>")
    if timings:
        total = sum(seconds for _, seconds in timings)
        parts.append(html_table(["stage", "seconds"], [*timings, ("total", total)]))
    else:
        parts.append('<p class="muted">No stage timings recorded in the sections.</p>')
    parts.append("</section>")
    return "\n".join(parts)
