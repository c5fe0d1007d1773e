"""The README's sweep example (issue 16): ``dvc exp run --queue -S …`` ×N, ``dvc queue start -j 2``,
``dvc queue status``, ``dvc exp show``, run as written in a temporary copy of the repository.

To stay cheap, the copy has one tiny audit (digits identifiability, 20 trials, 3 epochs; the
parameters of ``test_dvc_workflow.py``), the stages up to ``sensitivity@digits`` really run, and the
lock records placeholder outputs for the later stages (``dvc commit``), so that each queued
experiment reruns only what a new ``identifiability.train.rho_beta`` reaches: check, train, losses,
attack, bounds and report.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("_dvc_workflow", REPO / "tests" / "test_dvc_workflow.py")
workflow = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(workflow)

AUDIT = workflow.AUDIT
SWEEP = {"rho-0-9": "[0.9]", "rho-0-99": "[0.99]"}


def _placeholders(work: Path) -> None:
    """Placeholder outputs of the stages after ``sensitivity@digits`` (replaced by every experiment)."""
    ds, exp = AUDIT.split("-", 1)
    files = [f"data/train/{ds}/{exp}/x", f"data/losses/{ds}/{exp}.npz", f"data/attacks/{ds}/{exp}/x",
             f"data/bounds/{AUDIT}/x", f"plots/{AUDIT}/x", f"results/{AUDIT}.json",
             f"results/{AUDIT}.csv", "reports/index.html", "metrics/summary.json",
             "results/fidelity.csv"]  # fmt: skip
    for name in files:
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n" if name.endswith(".json") else f"placeholder {name}\n")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_queued_sweep_runs_as_in_the_readme(tmp_path: Path) -> None:
    dvc = str(workflow.BIN / "dvc")
    run = workflow._run
    work = tmp_path / "repo"
    work.mkdir()
    workflow._copy_tree(work)
    workflow._shrink_params(work)
    run(["git", "init", "-q"], work)
    if not (work / ".dvc").is_dir():
        run([dvc, "init", "-q"], work)
    run([dvc, "repro", "sensitivity@digits"], work, timeout=300)
    _placeholders(work)
    run([dvc, "commit", "-f", "-q"], work, timeout=300)
    # The README's example, with the tiny parameters above.
    run(["git", "add", "-A"], work)
    run(["git", "commit", "-q", "-m", "baseline"], work)
    for name, value in SWEEP.items():
        run([dvc, "exp", "run", "--queue", "-n", name, "-S", f"identifiability.train.rho_beta={value}"], work)
    assert all(name in run([dvc, "queue", "status"], work) for name in SWEEP)
    run([dvc, "queue", "start", "-j", "2"], work)
    deadline = time.monotonic() + 720
    while True:
        status = run([dvc, "queue", "status"], work)
        if not any(word in status for word in ("Queued", "Running")):
            break
        assert time.monotonic() < deadline, status
        time.sleep(2)
    assert status.count("Success") == len(SWEEP), status
    shown = run([dvc, "exp", "show", "--only-changed", "--no-pager"], work)
    assert all(name in shown for name in SWEEP), shown
    rows = json.loads(run([dvc, "exp", "show", "--json"], work))
    beliefs = set()
    for row in rows:
        for exp in row.get("experiments") or []:
            for rev in exp.get("revs", []):
                data = (rev.get("data") or {}).get("metrics", {}).get("metrics/summary.json", {})
                beliefs.add((data.get("data") or {}).get(AUDIT, {}).get("rho_beta"))
    assert {0.9, 0.99} <= beliefs, rows
