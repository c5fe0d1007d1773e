"""The code each stage runs is exactly what dvc.yaml declares, and src/ has no import circle.

:mod:`dpaudit.deps` reads every import of ``src/dpaudit`` (static, including imports inside
functions) and generates the src/ deps of every stage in ``dvc.yaml``. These tests regenerate them in
memory: a new import that dvc.yaml does not declare fails here, with the command that fixes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dpaudit import deps

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def graph() -> deps.Graph:
    return deps.build_graph(REPO / "src")


def test_dvc_yaml_declares_exactly_the_code_each_stage_imports(graph: deps.Graph) -> None:
    text = (REPO / "dvc.yaml").read_text()
    assert (
        deps.render(text, graph) == text
    ), "dvc.yaml's src/ deps differ from the imports of the stages: run `python -m dpaudit.deps --write`"


def test_src_has_no_import_cycle(graph: deps.Graph) -> None:
    """No module of src/dpaudit imports itself through others, at module level or in a function."""
    assert deps.cycles(graph) == []


def test_cycles_finds_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    """The cycle check sees imports inside functions (the kind of circle that once hid in a config
    check) and ignores a submodule importing its own package."""
    src = tmp_path / "src" / "dpaudit"
    (src / "pkg").mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "pkg" / "__init__.py").write_text("from dpaudit.pkg import a\n")
    (src / "pkg" / "a.py").write_text("import dpaudit.pkg\n\ndef f():\n    from dpaudit.pkg import b\n")
    (src / "pkg" / "b.py").write_text("LIMIT = 1\n")
    assert deps.cycles(deps.build_graph(tmp_path / "src")) == []
    (src / "pkg" / "b.py").write_text("from dpaudit.pkg.a import f\n")
    assert deps.cycles(deps.build_graph(tmp_path / "src")) == [["dpaudit.pkg.a", "dpaudit.pkg.b"]]


def test_run_time_imports_are_declared(graph: deps.Graph) -> None:
    """An ``importlib.import_module`` with a computed name is invisible to the graph: each must be
    listed in :data:`dpaudit.deps.DYNAMIC_SITES` and modelled by :data:`dpaudit.deps.STAGES`."""
    found = {module: tuple(sites) for module, sites in graph.dynamic.items()}
    assert found == deps.DYNAMIC_SITES


def _paths(graph: deps.Graph, kind: str, experiment: str | None = None) -> set[str]:
    return {graph.path(m) for m in deps.stage_modules(graph, kind, experiment)}


def test_train_stages_run_no_report_or_other_experiment(graph: deps.Graph) -> None:
    """Training reads no report, no Epsilon*/auditor/one-run estimator and no other experiment's code,
    so editing those never retrains."""
    experiments = [p.rpartition(".")[2] for p in graph.experiments()]
    for experiment in experiments:
        paths = _paths(graph, "train", experiment)
        others = [e for e in experiments if e != experiment]
        assert not {p for p in paths if p.startswith("src/dpaudit/report/")}, experiment
        for estimator in ("epsilon_star.py", "auditor.py", "onerun.py", "tradeoff.py"):
            assert f"src/dpaudit/bounds/{estimator}" not in paths, (experiment, estimator)
        assert not {p for p in paths for o in others if p.startswith(f"src/dpaudit/experiments/{o}/")}
        assert "src/dpaudit/pipeline/check.py" not in paths
        assert f"src/dpaudit/experiments/{experiment}/bounds.py" not in paths
        assert f"src/dpaudit/experiments/{experiment}/report.py" not in paths


def test_report_modules_reach_only_the_report_and_the_check(graph: deps.Graph) -> None:
    for kind, stage in deps.STAGES.items():
        experiments = (
            [None]
            if stage.experiment_modules is None
            else [p.rpartition(".")[2] for p in graph.experiments()]
        )
        for experiment in experiments:
            paths = _paths(graph, kind, experiment)
            if kind not in ("report", "check"):
                assert "src/dpaudit/report/render.py" not in paths, (kind, experiment)
                assert "src/dpaudit/report/figures.py" not in paths, (kind, experiment)


def test_per_audit_stages_name_their_experiments_modules_by_template(graph: deps.Graph) -> None:
    listed = deps.stage_deps(graph, "bounds")
    assert "src/dpaudit/experiments/${item.experiment}/bounds.py" in listed
    assert "src/dpaudit/experiments/${item.experiment}/report.py" in listed
    assert not [p for p in listed if "/experiments/identifiability/" in p]
    train = deps.stage_deps(graph, "train")
    assert "src/dpaudit/experiments/${item.experiment}/train.py" in train
    assert "src/dpaudit/experiments/${item.experiment}/bounds.py" not in train


def test_lazy_reexports_are_followed(tmp_path: Path) -> None:
    """``from pkg import name`` of a lazily re-exported name depends on the module that defines it;
    a function-level import counts; a TYPE_CHECKING import does not."""
    src = tmp_path / "src" / "dpaudit"
    (src / "pkg").mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "pkg" / "__init__.py").write_text('_LAZY = {"f": "dpaudit.pkg.impl"}\n')
    (src / "pkg" / "impl.py").write_text("def f():\n    from dpaudit import late\n")
    (src / "late.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dpaudit import typed\n"
    )
    (src / "typed.py").write_text("")
    (src / "user.py").write_text("from dpaudit.pkg import f\n")
    graph = deps.build_graph(tmp_path / "src")
    assert graph.closure(["dpaudit.user"]) == {
        "dpaudit",
        "dpaudit.pkg",
        "dpaudit.pkg.impl",
        "dpaudit.late",
        "dpaudit.user",
    }
    (src / "whole.py").write_text("from dpaudit import pkg\n")  # the package object: any lazy name
    assert "dpaudit.pkg.impl" in deps.build_graph(tmp_path / "src").closure(["dpaudit.whole"])


def test_check_mode_fails_on_stale_dvc_yaml(tmp_path: Path) -> None:
    (tmp_path / "src").symlink_to(REPO / "src")
    (tmp_path / "stages").symlink_to(REPO / "stages")
    text = (REPO / "dvc.yaml").read_text()
    stale = text.replace("        - src/dpaudit/experiments/${item.experiment}/train.py\n", "", 1)
    assert stale != text
    (tmp_path / "dvc.yaml").write_text(stale)
    assert deps.main(["--check", "--root", str(tmp_path)]) == 1
    assert deps.main(["--write", "--root", str(tmp_path)]) == 0
    assert (tmp_path / "dvc.yaml").read_text() == text


def test_a_train_stage_loads_only_modules_dvc_yaml_declares(graph: deps.Graph) -> None:
    """At run time, too: the train stage's script plus the audit's experiment and train module load
    no dpaudit module outside the computed closure (the static graph may list more, never fewer)."""
    audit, experiment = "digits-membership", "membership"
    code = textwrap.dedent(
        f"""
        import importlib, json, runpy, sys
        import yaml
        runpy.run_path("stages/train.py", run_name="stage")
        from dpaudit.pipeline.audits import load_audit
        params = yaml.safe_load(open("params.yaml"))
        _, exp, _ = load_audit(params, {audit!r})
        importlib.import_module(exp.package + ".train")
        print(json.dumps(sorted(m for m in sys.modules if m == "dpaudit" or m.startswith("dpaudit."))))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300, check=True
    )
    loaded = set(json.loads(result.stdout.strip().splitlines()[-1]))
    declared = deps.stage_modules(graph, "train", experiment)
    assert loaded - declared == set()
    assert f"dpaudit.experiments.{experiment}.train" in loaded
    assert not {m for m in loaded if m.startswith("dpaudit.experiments.identifiability")}


def test_lazy_packages_load_their_modules_on_first_use() -> None:
    """``dpaudit.bounds`` (:func:`dpaudit.lazy.lazy_exports`) loads no module of its table on import,
    loads the defining one on first use, lists its names in ``dir()`` and refuses unknown names."""
    code = textwrap.dedent(
        """
        import json, sys
        import dpaudit.bounds as bounds
        before = sorted(m for m in sys.modules if m.startswith("dpaudit.bounds."))
        bounds.gdp_epsilon
        after = sorted(m for m in sys.modules if m.startswith("dpaudit.bounds."))
        try:
            bounds.no_such_name
            missing = None
        except AttributeError as exc:
            missing = str(exc)
        print(json.dumps([before, after, "gdp_epsilon" in dir(bounds), missing]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    before, after, listed, missing = json.loads(result.stdout.strip().splitlines()[-1])
    assert before == []
    assert after == ["dpaudit.bounds.tradeoff"]
    assert listed
    assert missing == "module 'dpaudit.bounds' has no attribute 'no_such_name'"


def test_dvc_params_of_custom_datasets_name_only_required_keys() -> None:
    """DVC stops on a missing param ("Parameters 'data.custom.cu.measure' are missing") after ``check``
    has passed, so a stage may track a custom entry's optional key only through the whole entry."""
    import dataclasses
    import re

    import yaml

    from dpaudit.data.custom_spec import CustomDatasetSpec

    optional = {
        f.name
        for f in dataclasses.fields(CustomDatasetSpec)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }
    stages = yaml.safe_load((deps.ROOT / "dvc.yaml").read_text())["stages"]
    named = {
        m.group(1)
        for stage in stages.values()
        for param in stage.get("do", stage).get("params", [])
        if isinstance(param, str) and (m := re.fullmatch(r"data\.custom\.\$\{key\}\.(\w+)", param))
    }
    assert named and "path" in named
    assert not named & optional, f"optional keys tracked by name: {sorted(named & optional)}"
