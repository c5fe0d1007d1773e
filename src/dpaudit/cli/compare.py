"""``dpaudit compare``: DVC's experiments side by side, one row per experiment, in 100 columns.

``dvc exp show --json`` gives, for the baseline commit, each experiment and the workspace, the
parameters and DVC's metrics: ``metrics/summary.json``, the headline of every audit (the report's
selection from its results table). The command keeps the parameters that differ between them and
the audits whose headline differs (or the ones ``--audit`` names), and hands them to
:mod:`.compare_table`, which lays them out. Where a summary names no utility measure, the audit's
results table at that experiment's commit (``results/<audit>.csv``, its ``utility`` rows) does.
The workspace gets a row only where it holds something no experiment or baseline holds. DVC runs
in a subprocess of this interpreter, so nothing of it is imported here.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpaudit.cli.args import CliError, Command
from dpaudit.cli.compare_table import changed_audits, flatten, headline, render

SUMMARY = "metrics/summary.json"
PARAMS = "params.yaml"
RESULTS = "results/{audit}.csv"
WORKSPACE = "workspace"


def _configure_compare(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--audit",
        action="append",
        metavar="NAME",
        help="show this audit (repeat for more); default: every audit whose headline differs",
    )
    parser.add_argument(
        "--repo", type=Path, default=Path("."), metavar="DIR", help="the DVC project (default: here)"
    )


# ------------------------------------------------------------------------------------------- reading


def dvc_root(start: Path) -> Path:
    """The directory holding ``.dvc/`` at or above ``start``; a :class:`CliError` where there is none."""
    start = start.resolve()
    if not start.is_dir():
        raise CliError("--repo", f"{start} is not a directory")
    for folder in (start, *start.parents):
        if (folder / ".dvc").is_dir():
            return folder
    raise CliError("--repo", f"{start} is not inside a DVC project (no .dvc directory there or above)")


def has_experiments(root: Path) -> bool:
    """Whether git holds any DVC experiment (run or queued: refs under ``refs/exps``). Asking git
    takes milliseconds where ``dvc exp show`` takes tens of seconds; True when git cannot tell."""
    proc = subprocess.run(
        ["git", "for-each-ref", "--count=1", "refs/exps"], cwd=root, capture_output=True, text=True
    )
    return proc.returncode != 0 or bool(proc.stdout.strip())


def exp_show(root: Path) -> list[dict[str, Any]]:
    """``dvc exp show --json`` of the project at ``root``, run with this interpreter's DVC."""
    if importlib.util.find_spec("dvc") is None:
        raise CliError("--repo", "DVC is not installed in this Python environment (pip install 'dvc>=3')")
    proc = subprocess.run(
        [sys.executable, "-m", "dvc", "exp", "show", "--json"], cwd=root, capture_output=True, text=True
    )
    if proc.returncode != 0:
        lines = [line.removeprefix("ERROR: ") for line in proc.stderr.strip().splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit status {proc.returncode}"
        raise CliError("--repo", f"`dvc exp show --json` failed in {root}: {reason}")
    try:
        payload = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError as exc:
        raise CliError("--repo", f"`dvc exp show --json` printed no JSON ({exc})") from None
    return payload if isinstance(payload, list) else []


def _file_data(files: Any, name: str) -> Any:
    entry = (files or {}).get(name) or {}
    return entry.get("data") if isinstance(entry, Mapping) else None


def record(entry: Mapping[str, Any], kind: str, name: str) -> dict[str, Any] | None:
    """One row's raw material from an entry of ``dvc exp show --json``; None without results."""
    data = entry.get("data")
    if entry.get("error") or not isinstance(data, Mapping):
        return None
    params: dict[str, Any] = {}
    for file in data.get("params") or {}:
        flat = flatten(_file_data(data["params"], file) or {})
        params.update(flat if file == PARAMS else {f"{file}:{key}": v for key, v in flat.items()})
    summary = _file_data(data.get("metrics"), SUMMARY)
    if not isinstance(summary, Mapping):
        return None
    rev = str(data.get("rev") or entry.get("rev") or "")
    return {
        "name": name,
        "rev": rev,
        "kind": kind,
        "created": data.get("timestamp"),
        "params": params,
        "summary": dict(summary),
    }


def experiments_of(payload: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows (baseline, its experiments oldest first, the workspace where it differs) and notes on
    what was left out. Raises :class:`CliError` when there is no baseline or no experiment."""
    workspace = next((e for e in payload if e.get("rev") == WORKSPACE), None)
    commits = [e for e in payload if e.get("rev") != WORKSPACE]
    if not commits:
        raise CliError(None, "no git commit to compare with: commit a baseline, then `dvc exp run -S ...`")
    top = commits[0]
    base = record(top, "baseline", str(top.get("name") or str(top.get("rev", ""))[:7]))
    if base is None:
        raise CliError(None, f"the baseline commit has no {SUMMARY}: run `dvc repro` and commit it first")
    rows, left_out = [], 0
    for experiment in top.get("experiments") or []:
        revs = experiment.get("revs") or []
        first = revs[0] if revs else {}
        name = experiment.get("name") or first.get("name") or str(first.get("rev", ""))[:7]
        state = (experiment.get("executor") or {}).get("state")
        unfinished = state in ("queued", "running", "failed")
        row = record(first, "experiment", str(name)) if first and not unfinished else None
        if row is None:
            left_out += 1
        else:
            rows.append(row)
    if not rows:
        detail = f" ({left_out} without {SUMMARY}: queued, running or failed)" if left_out else ""
        hint = "run one with `dvc exp run -S key=value`"
        raise CliError(None, f"no DVC experiments of this commit{detail}: {hint}")
    rows.sort(key=lambda r: r["created"] or "")
    rows.insert(0, base)
    here = record(workspace, WORKSPACE, WORKSPACE) if workspace is not None else None
    if here is not None and all(
        (here["params"], here["summary"]) != (r["params"], r["summary"]) for r in rows
    ):
        rows.append(here)
    notes = [f"{left_out} experiment(s) without {SUMMARY} left out (queued, running or failed)"]
    return rows, notes if left_out else []


def table_measure(root: Path, rev: str, audit: str) -> str | None:
    """The utility measure of an audit's results table at ``rev`` (its ``utility`` rows' estimator)."""
    path = RESULTS.format(audit=audit)
    if rev == WORKSPACE:
        text = (root / path).read_text() if (root / path).is_file() else ""
    else:
        proc = subprocess.run(["git", "show", f"{rev}:./{path}"], cwd=root, capture_output=True, text=True)
        text = proc.stdout if proc.returncode == 0 else ""
    rows = csv.DictReader(io.StringIO(text))
    measures = {r.get("estimator") for r in rows if r.get("quantity") == "utility" and r.get("estimator")}
    return measures.pop() if len(measures) == 1 else None


# -------------------------------------------------------------------------------------------- result


def compare(
    rows: Sequence[Mapping[str, Any]], audits: Sequence[str] | None = None, root: Path | None = None
) -> dict[str, Any]:
    """The command's result from :func:`experiments_of` rows: per row the parameters that differ
    between rows and the headlines of ``audits`` (default: those that differ); JSON-ready."""
    summaries = [r["summary"] for r in rows]
    known = list(dict.fromkeys(a for s in summaries for a in s))
    if audits:
        unknown = [a for a in audits if a not in known]
        if unknown:
            listed = ", ".join(known) or "none"
            raise CliError("--audit", f"no audit {', '.join(unknown)} in {SUMMARY} (audits: {listed})")
        chosen = list(dict.fromkeys(audits))
    else:
        chosen = changed_audits(summaries)
    keys = list(dict.fromkeys(k for r in rows for k in r["params"]))
    values = [{json.dumps(r["params"].get(k, "\0absent"), sort_keys=True) for r in rows} for k in keys]
    changed = [k for k, seen in zip(keys, values, strict=True) if len(seen) > 1]
    out = []
    for r in rows:
        heads = {a: headline(r["summary"][a]) for a in chosen if isinstance(r["summary"].get(a), Mapping)}
        for audit, head in heads.items():
            if head["utility"] is not None and head["utility_measure"] is None and root is not None:
                head["utility_measure"] = table_measure(root, r["rev"], audit)
        params = {k: r["params"][k] for k in changed if k in r["params"]}
        row = {key: r[key] for key in ("name", "rev", "kind", "created")}
        out.append({**row, "params": params, "headlines": heads})
    return {"experiments": out, "audits": chosen}


def _run_compare(args: argparse.Namespace) -> dict[str, Any]:
    root = dvc_root(args.repo)
    if not has_experiments(root):
        raise CliError(None, f"no DVC experiments in {root} yet: run one with `dvc exp run -S key=value`")
    rows, notes = experiments_of(exp_show(root))
    result = compare(rows, args.audit, root)
    if notes:
        result["notes"] = notes
    return result


def _compare_text(result: dict[str, Any]) -> list[str]:
    return render(result)


COMPARE = Command(
    "compare",
    "DVC experiments side by side: changed parameters, ε proven and promised, ratio, utility",
    _configure_compare,
    _run_compare,
    _compare_text,
)
