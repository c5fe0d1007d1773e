"""The README's workflows, in a temporary copy of the repository, and what each change reruns.

Scoping (issue 9): with the lock recorded by ``dvc commit`` over placeholder outputs (no stage
runs, so these tests take seconds), ``dvc status`` must mark exactly the stages that read a changed
key or module (a module's edit is read from that lock, as ``dvc status`` compares it; the slow
every-file test checks that reading against ``dvc status`` itself): attack and bounds knobs and
the report never retrain; a report module reruns at most bounds and report; one dataset's settings
never touch another dataset's stages; removing an audit reruns the report.


Compare two settings: copy the working tree (what git would commit: no virtualenv, no pipeline
outputs), shrink ``params.yaml`` to one small audit, ``dvc repro``, commit, then change the target
belief bound with ``dvc exp run -S`` and check that ``dvc metrics diff`` reports the ε upper bound moving from
ln(0.75/0.25) to ln(0.9/0.1) (Bernau et al. Eq. 10: ε = ln(ρβ/(1−ρβ)), noise calibrated by RDP).
Also runs the other commands the README shows: ``dvc exp show``, ``dvc plots show`` / ``diff``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
AUDIT = "digits-identifiability"
TINY_IDENTIFIABILITY = {
    "rho_beta": [0.75],
    "reference_rho_beta": 0.75,
    "sensitivities": ["local"],
    "neighbours": ["bounded"],
    "trials": 20,
    "epochs": 3,
    "candidate_trials": 0,
}

PIPELINE_OUTPUTS = (
    "metrics/",
    "results/",
    "plots/",
    "reports/",
    "data/timing/",
    "data/check/",
    "dvc.lock",
    "dvc_plots/",
    "tests/artifacts/",
)


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # stage commands call `python`
            "PYTHONPATH": str(work / "src"),  # the copy's code, not the editable install's
            "DPAUDIT_PROGRESS": "0",
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "DVC_NO_ANALYTICS": "1",
            "COLUMNS": "400",  # `dvc exp show` fits its table to the terminal; make room for every column
            "GIT_AUTHOR_NAME": "dpaudit test",
            "GIT_AUTHOR_EMAIL": "test@example.invalid",
            "GIT_COMMITTER_NAME": "dpaudit test",
            "GIT_COMMITTER_EMAIL": "test@example.invalid",
        }
    )
    return env


def _run(args: list[str], work: Path, timeout: float = 300) -> str:
    result = subprocess.run(args, cwd=work, env=_env(work), capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {result.returncode}\n--- stdout\n{result.stdout[-4000:]}"
            f"\n--- stderr\n{result.stderr[-4000:]}"
        )
    return result.stdout


def _copy_tree(work: Path, with_outputs: bool = False) -> None:
    """Copy what git would commit (tracked and untracked-but-not-ignored files) into ``work``.

    Results of an earlier run in the source tree (committed metrics, plots, dvc.lock) are left out
    unless ``with_outputs``: the copy starts from nothing and produces its own.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file() and (with_outputs or not name.startswith(PIPELINE_OUTPUTS)):
            target = work / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _shrink_params(work: Path) -> None:
    """One small audit: digits only, one identifiability setting, few trials and epochs."""
    path = work / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params["data"]["datasets"] = ["digits"]
    params["audits"] = {AUDIT: {"dataset": "digits", "experiment": "identifiability"}}
    params["identifiability"]["train"] = {**params["identifiability"]["train"], **TINY_IDENTIFIABILITY}
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def _changes(diff: dict[str, Any], path: str) -> dict[str, dict[str, Any]]:
    """``dvc metrics diff --json`` entries of one file, keyed by dotted metric name."""
    entries = diff.get(path, {})
    return {str(k): v for k, v in entries.items()}


@pytest.mark.slow
def test_exp_run_moves_the_epsilon_metric(tmp_path):
    if not (REPO / "dvc.yaml").is_file():
        pytest.skip("dvc.yaml is missing")
    dvc = str(BIN / "dvc")
    work = tmp_path / "repo"
    work.mkdir()
    _copy_tree(work)
    _shrink_params(work)
    _run(["git", "init", "-q"], work)
    if not (work / ".dvc").is_dir():
        _run([dvc, "init", "-q"], work)
    _run([dvc, "repro"], work, timeout=600)
    before = json.loads((work / "metrics" / "summary.json").read_text())[AUDIT]
    assert before["rho_beta"] == 0.75
    assert before["epsilon_upper"]["rdp"] == pytest.approx(math.log(3.0), rel=0.02)
    _run(["git", "add", "-A"], work)
    _run(["git", "commit", "-q", "-m", "baseline"], work)

    _run([dvc, "exp", "run", "-S", "identifiability.train.rho_beta=[0.9]"], work, timeout=600)

    diff = json.loads(_run([dvc, "metrics", "diff", "--json"], work))
    summary = _changes(diff, "metrics/summary.json")
    rdp = summary[f"{AUDIT}.epsilon_upper.rdp"]
    assert rdp["old"] == pytest.approx(math.log(3.0), rel=0.02)
    assert rdp["new"] == pytest.approx(math.log(9.0), rel=0.02)
    assert summary[f"{AUDIT}.rho_beta"]["new"] == 0.9
    # Only the headlines are DVC metrics: every number of the audit lives in results/, not in the diff.
    assert set(diff) == {"metrics/summary.json"}
    assert all(key.startswith(f"{AUDIT}.") for key in summary)

    assert "metrics/summary.json" in _run([dvc, "metrics", "show"], work)
    assert "up to date" in _run([dvc, "repro", f"bounds@{AUDIT}"], work)
    shown = _run([dvc, "exp", "show", "--only-changed", "--no-pager"], work)
    assert "rho_beta" in shown
    _run([dvc, "plots", "show", "-o", str(tmp_path / "plots-show")], work)
    assert (tmp_path / "plots-show" / "index.html").stat().st_size > 1000
    _run([dvc, "plots", "diff", "-o", str(tmp_path / "plots-diff")], work)
    assert (tmp_path / "plots-diff" / "index.html").is_file()
    report = (work / "reports" / "index.html").read_text(encoding="utf-8")
    assert 'data-audit="digits-identifiability"' in report


# ----------------------------------------------------------------------------------------------
# Stage scoping: what `dvc status` marks after one change.

# Every default audit and dataset of the repository's params.yaml (all of them need placeholder outputs).
_DEFAULTS = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
AUDITS = tuple(_DEFAULTS["audits"])
DATASETS = tuple(_DEFAULTS["data"]["datasets"])


def _placeholder_outputs(work: Path) -> None:
    """One small file per declared output, so that `dvc commit` can record a lock without running."""
    files = ["data/check/params.ok", "reports/index.html", "metrics/summary.json", "results/fidelity.csv"]
    for ds in DATASETS:
        files += [f"data/raw/{ds}/x", f"data/prepared/{ds}.npz", f"data/sensitivity/{ds}.json"]
    for audit in AUDITS:
        ds, exp = audit.split("-", 1)
        files += [f"data/train/{ds}/{exp}/x", f"data/losses/{ds}/{exp}.npz", f"data/attacks/{ds}/{exp}/x"]
        files += [f"data/bounds/{audit}/x", f"plots/{audit}/x", f"results/{audit}.json"]
        files += [f"results/{audit}.csv"]
        files += [f"data/check/models/{audit}.json"]
    for name in files:
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n" if name.endswith(".json") else f"placeholder {name}\n")


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository whose dvc.lock records every stage as up to date."""
    work = tmp_path_factory.mktemp("scoping") / "repo"
    work.mkdir()
    _copy_tree(work)
    _run(["git", "init", "-q"], work)
    dvc = str(BIN / "dvc")
    if not (work / ".dvc").is_dir():
        _run([dvc, "init", "-q"], work)
    _placeholder_outputs(work)
    _run([dvc, "commit", "-f", "-q"], work, timeout=300)
    assert "up to date" in _run([dvc, "status"], work)
    return work


def _stale(work: Path) -> set[str]:
    out = _run([str(BIN / "dvc"), "status", "--json"], work)
    return set(json.loads(out or "{}"))


@pytest.fixture
def edit(committed: Path) -> Any:
    """Apply one change (to one file or several) at a time to the committed copy, earlier ones undone;
    restore at the end."""
    saved: dict[Path, str] = {}

    def apply(names: str | tuple[str, ...], change: Any) -> set[str]:
        for path, text in saved.items():
            path.write_text(text)
        for name in (names,) if isinstance(names, str) else names:
            path = committed / name
            saved.setdefault(path, path.read_text())
            path.write_text(change(saved[path]))
        return _stale(committed)

    yield apply
    for path, text in saved.items():
        path.write_text(text)


@pytest.fixture(scope="module")
def code_edit(committed: Path) -> Any:
    """The stages an edit of some src/ files marks stale, read from the committed dvc.lock as ``dvc
    status`` compares it (a few seconds of ``dvc status`` each otherwise; the slow tier's
    every-file test checks this reading against ``dvc status`` itself)."""
    deps = _lock_deps(committed)

    def stale(names: str | tuple[str, ...]) -> set[str]:
        return set().union(
            *(_stale_after_editing(deps, n) for n in ((names,) if isinstance(names, str) else names))
        )

    return stale


def _set_param(key: str, value: Any) -> Any:
    def change(text: str) -> str:
        params = yaml.safe_load(text)
        *parents, last = key.split(".")
        node = params
        for part in parents:
            node = node[part]
        if value is None:
            del node[last]
        else:
            node[last] = value
        return yaml.safe_dump(params, sort_keys=False, allow_unicode=True)

    return change


def _families(stages: set[str]) -> set[str]:
    return {stage.split("@", 1)[0] for stage in stages}


def test_attack_bounds_and_report_params_never_retrain(edit: Any) -> None:
    stale = edit("params.yaml", _set_param("membership.attack.fpr", 0.01))
    assert stale == {"check", "attack@adult-membership", "attack@digits-membership", "report"}
    stale = edit("params.yaml", _set_param("identifiability.bounds.confidence", 0.99))
    assert stale >= {"bounds@adult-identifiability", "bounds@digits-identifiability"}
    assert not _families(stale) & {"train", "losses", "attack"}, stale
    stale = edit("params.yaml", _set_param("report.title", "another title"))
    assert stale == {"check", "report"}


def _comment(text: str) -> str:
    return text + "# a comment\n"


def test_report_code_reruns_at_most_bounds_and_report(code_edit: Any) -> None:
    """An experiment's report module reruns its own bounds stages only; the report renderer and its
    figures rerun the report alone (the check validates the report section with report/config.py)."""
    stale = code_edit("src/dpaudit/experiments/identifiability/report.py")
    assert stale == {"bounds@adult-identifiability", "bounds@digits-identifiability"}
    stale = code_edit("src/dpaudit/experiments/membership/report.py")
    assert stale == {"bounds@adult-membership", "bounds@digits-membership"}
    stale = code_edit("src/dpaudit/report/render.py")
    assert stale == {"report"}, stale
    stale = code_edit("src/dpaudit/report/figures.py")
    assert stale == {"report"}, stale


def test_an_estimator_never_retrains(code_edit: Any) -> None:
    """Estimators run in the bounds stages only (attack stages hand on score sets and import nothing
    from bounds/): an estimator's edit reruns bounds stages and at most the report."""
    stale = code_edit("src/dpaudit/bounds/epsilon_star/estimators.py")
    assert "bounds@adult-membership" in stale
    assert _families(stale) <= {"bounds", "report"}, stale
    stale = code_edit("src/dpaudit/bounds/onerun.py")
    # check too: it records the md5 of the training audit library (which runs the one-run bound) for
    # that audit alone, so the edit retrains only the training audit, whose training ran under it
    assert "bounds@adult-onerun" in stale and _families(stale) == {"bounds", "check"}, stale


def test_attack_and_bound_code_the_trainer_once_ran_never_retrains_or_recomputes_losses(
    code_edit: Any, committed: Path
) -> None:
    """The DI observer, the canary crafter, the accountants, the logits' losses and the world draws
    now live in training/ and data/; the attack and bound modules they came from, and the results
    types, no longer make a train or losses stage stale.

    A stage is stale when any of its recorded deps changed, so the edits together mark the union of
    what each edit alone marks: no train or losses stage in the union means none for any single file.
    That each file still reruns something is read from the lock itself."""
    names = (
        "src/dpaudit/attacks/di.py",
        "src/dpaudit/attacks/gradient_canary.py",
        "src/dpaudit/attacks/lira.py",
        "src/dpaudit/attacks/membership.py",
        "src/dpaudit/bounds/accountants.py",
        "src/dpaudit/bounds/empirical.py",
        "src/dpaudit/bounds/identifiability.py",
        "src/dpaudit/results.py",
    )
    depended_on = {path for paths in _lock_deps(committed).values() for path in paths}
    assert not [name for name in names if name not in depended_on]
    stale = code_edit(names)
    assert stale and not _families(stale) & {"train", "losses"}, stale
    stale = code_edit("src/dpaudit/training/accounting.py")
    assert {"train@adult-membership", "train@digits-identifiability"} <= stale, stale


def test_an_experiments_training_code_retrains_only_its_audits(code_edit: Any) -> None:
    stale = code_edit("src/dpaudit/experiments/membership/train.py")
    assert {s.split("@", 1)[1] for s in stale if "@" in s} == {"adult-membership", "digits-membership"}
    assert {"train@adult-membership", "train@digits-membership"} <= stale


def test_one_datasets_settings_never_touch_another_dataset(edit: Any) -> None:
    stale = edit("params.yaml", _set_param("sensitivity.measures.mnist", "euclidean"))
    assert stale == {"check", "report"}  # mnist is not in this run
    stale = edit("params.yaml", _set_param("sensitivity.measures.digits", "manhattan"))
    assert stale == {"check", "sensitivity@digits", "report"}
    stale = edit("params.yaml", _set_param("membership.datasets.digits.members", 500))
    assert stale == {"check", "train@digits-membership", "report"}
    stale = edit("params.yaml", _set_param("identifiability.datasets.adult.learning_rate", 0.4))
    assert not {s for s in stale if "digits" in s}, stale
    stale = edit("params.yaml", _set_param("data.prepare.adult.eval_size", 4000))
    assert not {s for s in stale if "digits" in s}, stale
    assert "prepare@adult" in stale


def test_removing_an_audit_reruns_the_report(edit: Any) -> None:
    stale = edit("params.yaml", _set_param("audits.digits-membership", None))
    assert "report" in stale and not _families(stale) - {"check", "report"}, stale


#: The plumbing a train stage runs outside training/, data/, sensitivity/ and the experiment's own
#: config/design/train modules; editing one of these may retrain, editing any other src/ file must
#: not (DVC's foreach gives every audit the same deps, so this is the union over experiments).
TRAIN_SHARED = {
    "src/dpaudit/__init__.py": "the package itself: every import of dpaudit runs it",
    "src/dpaudit/config.py": "the params schema helpers every experiment's config is read with",
    "src/dpaudit/io.py": "atomic JSON/NPZ writes of the weights and the manifest",
    "src/dpaudit/lazy.py": "the lazy re-exports of config, pipeline and training",
    "src/dpaudit/layout.py": "where a stage writes (audit paths, manifest name)",
    "src/dpaudit/logs.py": "the stage's progress log",
    "src/dpaudit/pipeline/__init__.py": "the stage runner's package",
    "src/dpaudit/pipeline/audits.py": "reads params.yaml's audit list into (dataset, experiment)",
    "src/dpaudit/pipeline/runner.py": "runs a stage of one audit: timing, outputs, errors",
    "src/dpaudit/pipeline/train.py": "the train stage's entry (stages/train.py calls it)",
    "src/dpaudit/experiments/__init__.py": "the experiment registry that finds the audit's package",
    "src/dpaudit/experiments/base.py": "the contract: TrainManifest, Mechanism and the stage hooks",
    "src/dpaudit/experiments/params.py": "the train parameter blocks the experiments' configs share",
}
TRAIN_OWN = ("__init__.py", "config.py", "train.py", "design/")


def _may_retrain(path: str, experiment: str) -> bool:
    """Whether editing ``path`` may mark ``train@<ds>-<experiment>`` stale (see TRAIN_SHARED)."""
    if path in TRAIN_SHARED or path.startswith(
        ("src/dpaudit/training/", "src/dpaudit/data/", "src/dpaudit/sensitivity/")
    ):
        return True
    own = f"src/dpaudit/experiments/{experiment}/"
    return path.startswith(own) and path[len(own) :].startswith(TRAIN_OWN)


def test_train_stages_import_only_what_may_retrain() -> None:
    """The static half of the scoping test (no DVC run): every module a train stage imports, by the
    import graph dvc.yaml's deps are generated from, is one :func:`_may_retrain` allows, and
    TRAIN_SHARED lists no module that no train stage imports (so the list stays minimal)."""
    from dpaudit import deps

    graph = deps.build_graph(REPO / "src")
    shared: set[str] = set()
    for package in graph.experiments():
        experiment = package.rpartition(".")[2]
        paths = {graph.path(m) for m in deps.stage_modules(graph, "train", experiment)}
        assert not [p for p in paths if not _may_retrain(p, experiment)], experiment
        shared |= {p for p in paths if p in TRAIN_SHARED}
    assert shared == set(TRAIN_SHARED)
    listed = [p for p in deps.stage_deps(graph, "train") if "${item.experiment}" not in p]
    assert not [p for p in listed if p not in TRAIN_SHARED and not _may_retrain(p, "")]


def _training_audit_library() -> set[str]:
    """The files the check stage records by md5 for a training audit (the library its training runs
    under, dpaudit.training_audit and the bounds it imports): editing one reruns ``check``."""
    from dpaudit import deps

    graph = deps.build_graph(REPO / "src")
    return {graph.path(m) for m in graph.closure(["dpaudit.training_audit.runs"])}


def _lock_deps(work: Path) -> dict[str, list[str]]:
    """Each stage's dep paths as ``work``'s dvc.lock records them."""
    stages = yaml.safe_load((work / "dvc.lock").read_text())["stages"]
    return {name: [d["path"].rstrip("/") for d in entry.get("deps", [])] for name, entry in stages.items()}


def _stale_after_editing(deps: dict[str, list[str]], name: str) -> set[str]:
    """The stages ``dvc status`` marks once ``name`` changes: every stage whose deps (``_lock_deps``)
    list the file or a folder above it, which is what ``dvc status`` compares."""
    return {s for s, paths in deps.items() if any(name == p or name.startswith(p + "/") for p in paths)}


def _scoping_failures(name: str, stale: set[str], library: set[str]) -> list[str]:
    """What is wrong with ``stale`` as the stages an edit of ``name`` reruns (see the test below);
    ``library`` is :func:`_training_audit_library`."""
    failures: list[str] = []
    for stage in stale:
        family, _, audit = stage.partition("@")
        experiment = audit.split("-", 1)[1] if family in ("train", "losses", "attack", "bounds") else ""
        if family == "train" and not _may_retrain(name, experiment):
            failures.append(f"{name} retrains {stage}")
        estimator = name.startswith("src/dpaudit/bounds/") and name not in TRAIN_SHARED
        recorded = estimator and name in library
        if estimator and family not in ("bounds", "report", "fidelity") + ("check",) * recorded:
            failures.append(f"estimator {name} reruns {stage}")
        validated = name in ("src/dpaudit/report/config.py", "src/dpaudit/report/__init__.py")
        if name.startswith("src/dpaudit/report/") and family not in ("report",) + ("check",) * validated:
            failures.append(f"report module {name} reruns {stage}")
        parts = name.split("/")
        if parts[2] == "experiments" and len(parts) > 4 and experiment and parts[3] != experiment:
            failures.append(f"{name} reruns {stage} of another experiment")
    return failures


@pytest.mark.slow
def test_every_src_file_reruns_only_the_stages_it_belongs_to(committed: Path) -> None:
    """Every file under src/, edited, marks only the stages it belongs to:

    - ``train@<audit>`` is stale only for the files :func:`_may_retrain` allows (training/, data/,
      sensitivity/, the experiment's own config/design/train modules and TRAIN_SHARED, each
      justified above); so bounds/, attacks/ and report/ modules outside TRAIN_SHARED never retrain;
    - a bounds/ estimator outside TRAIN_SHARED marks only ``bounds@*``, ``report`` and ``fidelity``
      (whose table computes the Clopper–Pearson cap of Nasr et al. with the library);
    - report/ modules mark only ``report`` (``check`` too for report/config.py, the report section's
      validation, and the package's ``__init__``);
    - an experiment's own modules never mark another experiment's stages.

    The stale set of each file is read from the committed dvc.lock (one ``dvc status`` per file took
    half an hour); that reading is checked against a real ``dvc status`` after appending a comment
    to one file of each kind, so it cannot drift from what DVC does.
    """
    files = sorted(p.relative_to(committed).as_posix() for p in (committed / "src").rglob("*.py"))
    assert len(files) > 100
    deps, library = _lock_deps(committed), _training_audit_library()
    stale = {name: _stale_after_editing(deps, name) for name in files}
    failures = [f for name in files for f in _scoping_failures(name, stale[name], library)]
    assert not failures, "\n".join(failures)

    kinds = ("training/", "data/", "bounds/estimators/", "report/", "experiments/training_audit/",
             "experiments/identifiability/", "training_audit/", "cli/")  # fmt: skip
    sample = [next(f for f in files if f.startswith("src/dpaudit/" + kind)) for kind in kinds]
    sample += ["src/dpaudit/__init__.py", "src/dpaudit/report/config.py"]
    for name in sample:
        path = committed / name
        text = path.read_text()
        path.write_text(_comment(text))
        try:
            assert _stale(committed) == stale[name], name
        finally:
            path.write_text(text)
