"""The experiment contract, checked the same way for every registered experiment (and a toy one).

Like dp_accounting's one abstract test per accountant: for each experiment of the registry, run its
five stages through the pipeline runner on a small synthetic dataset with the params section its
package ships in ``smoke.yaml``, then check that

- its config refuses unknown keys, naming the full key path;
- the train manifest rebuilds and every recorded mechanism has every accountant's ε;
- every metrics leaf is a finite number (what ``dvc metrics diff`` can show);
- the report section renders, declares the scores its headline carries, and every figure's CSV holds
  the columns the figure names;
- the package has one module per stage, the file names ``dvc.yaml`` depends on.

``test_a_toy_experiment_plugs_in_without_edits_elsewhere`` writes a new experiment package into a
temporary folder, adds that folder to the experiments' search path and passes the same checks: a new
experiment is one package and one params section.
"""

from __future__ import annotations

import copy
import math
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import dpaudit.experiments as experiments
from dpaudit import pipeline
from dpaudit.bounds.accountants import ACCOUNTANTS, epsilons_for_event
from dpaudit.config import ParamsError
from dpaudit.data.prepared import PreparedData
from dpaudit.experiments import Experiment, registry
from dpaudit.experiments.base import read_manifest
from dpaudit.layout import Audit
from dpaudit.report.figures import load_figure_data
from dpaudit.report.render import build_report
from dpaudit.results import ReportSection
from dpaudit.scores import ASSUMES
from dpaudit.sensitivity.search import (
    BoundedChoice,
    Candidate,
    PairCandidate,
    SensitivityResult,
    UnboundedChoice,
)
from dpaudit.table import QUANTITIES, ResultsTable

STAGE_MODULES = ("config", "train", "losses", "attack", "bounds", "report")
DATASET = "adult"  # synthetic rows under a registry name, so the default model family applies


def _leaves(tree: Any) -> Iterator[Any]:
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _leaves(value)
    else:
        yield tree


def _string_leaves(tree: Any, key: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(tree, dict):
        for name, value in tree.items():
            yield from _string_leaves(value, str(name))
    elif isinstance(tree, str):
        yield key, tree


def _package_dir(experiment: Experiment) -> Path:
    import importlib

    package = getattr(experiment, "package", type(experiment).__module__)  # PackagedExperiment or a class
    return Path(importlib.import_module(package).__file__).parent


def _smoke_section(experiment: Experiment) -> dict[str, Any]:
    raw = yaml.safe_load((_package_dir(experiment) / "smoke.yaml").read_text())
    return raw[experiment.name]


def _synthetic_inputs(root: Path) -> None:
    """A prepared tabular dataset (50 in D, 450 in the pool, 200 held out) and its sensitivity result."""
    rng = np.random.default_rng(0)
    n, d = 700, 6
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = (X[:, 0] + rng.normal(scale=0.5, size=n) > 0).astype(np.int64)
    order = rng.permutation(n)
    train, pool, evaluation = np.sort(order[:50]), np.sort(order[50:500]), np.sort(order[500:])
    audit = Audit(DATASET, "any", root)
    PreparedData(DATASET, "tabular", X, y, 2, tuple(f"f{i}" for i in range(d)), train, pool, evaluation).save(
        audit.prepared_path
    )
    t, p = [int(i) for i in train], [int(i) for i in pool]
    SensitivityResult(
        DATASET,
        "manhattan",
        UnboundedChoice(t[0], 9.0, [Candidate(t[0], 9.0)], [Candidate(t[1], 1.0)]),
        BoundedChoice(t[2], p[0], 7.0, [PairCandidate(t[2], p[0], 7.0)], [PairCandidate(t[3], p[1], 0.5)]),
    ).save(audit.sensitivity_path)


def check_contract(experiment: Experiment, root: Path) -> None:
    """Every check of the module docstring for one experiment, with its outputs under ``root``."""
    name = experiment.name
    package = _package_dir(experiment)
    assert all((package / f"{module}.py").is_file() for module in STAGE_MODULES), sorted(package.iterdir())
    assert (package / "design" / "__init__.py").is_file(), "the game and shared helpers live in design/"
    section = _smoke_section(experiment)
    params = {
        "data": {"datasets": [DATASET]},
        "audits": {f"{DATASET}-{name}": {"dataset": DATASET, "experiment": name}},
        name: section,
    }

    # Unknown keys are refused by their full path, at the top and in every stage's part.
    experiment.config_from_params(params)
    places = [[]] + [[key] for key, value in section.items() if isinstance(value, dict) and key != "datasets"]
    places += [["datasets", ds] for ds in section.get("datasets", {})]
    for place in places:
        bad = copy.deepcopy(section)
        node = bad
        for key in place:
            node = node[key]
        node["zz_unknown"] = 1
        path = ".".join([name, *place, "zz_unknown"])
        with pytest.raises(ParamsError, match=f"unknown key '{path}'"):
            experiment.config_from_params({**params, name: bad})

    _synthetic_inputs(root)
    audit_name = f"{DATASET}-{name}"
    for run in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        run(params, audit_name, root=root)
    audit = Audit(DATASET, name, root)

    manifest = read_manifest(audit)
    assert manifest.experiment == name and manifest.dataset == DATASET and 0 < manifest.delta < 1
    assert manifest.mechanisms, "the manifest records at least one mechanism"
    for mechanism in manifest.mechanisms.values():
        epsilons = epsilons_for_event(mechanism.dp_event(), manifest.delta)
        assert set(epsilons) == set(ACCOUNTANTS) and all(e >= 0 for e in epsilons.values())

    from dpaudit.io import read_json

    metrics = read_json(audit.results_path)
    leaves = list(_leaves(metrics))
    numbers = [v for v in leaves if not isinstance(v, str)]
    assert numbers and all(type(v) in (int, float) and math.isfinite(v) for v in numbers)
    # The only string leaves name a bound's assumption (a tag, one spelling everywhere) or estimator.
    for key, value in _string_leaves(metrics):
        assert key.endswith(("_assumes", "_estimator")), key
        assert not key.endswith("_assumes") or value in ASSUMES, (key, value)
    table = ResultsTable.load(audit.results_table_path)
    assert table.rows and {r.quantity for r in table.rows} <= set(QUANTITIES)
    assert read_json(audit.bounds_metrics_path) == metrics

    loaded = ReportSection.load(audit.section_path)
    assert loaded.experiment == name and loaded.dataset == DATASET and loaded.rows
    assert set(loaded.headline.scores) <= set(loaded.scores), "headline scores must be declared"
    for figure in loaded.figures:
        load_figure_data(figure, root)  # raises naming the figure when the CSV or a column is missing
    out, summary = root / "reports" / "index.html", root / "metrics" / "summary.json"
    build_report(root, out, summary, "contract", audits=[audit_name])
    assert f'data-audit="{audit_name}"' in out.read_text()
    entry = read_json(summary)[audit_name]
    fixed = {"epsilon_upper", "epsilon_lower", "epsilon_lower_level", "epsilon_lower_assumes", "utility"}
    fixed |= {"utility_measure"}
    assert set(entry) - fixed <= set(loaded.scores)
    if "epsilon_lower_assumes" in entry:
        assert entry["epsilon_lower_assumes"] in ASSUMES


@pytest.mark.parametrize("name", sorted(registry()))
def test_every_registered_experiment_meets_the_contract(name: str, tmp_path: Path) -> None:
    check_contract(registry()[name], tmp_path)


TOY_FILES = {
    "__init__.py": '''
        """Toy experiment: Gaussian scores for members and non-members, one DP-SGD mechanism."""

        from dpaudit.experiments import register
        from dpaudit.experiments.toyexp import attack, bounds, config, losses, report, train


        class Toy:
            name = "toyexp"
            config_from_params = staticmethod(config.config_from_params)
            train = staticmethod(train.train)
            losses = staticmethod(losses.losses)
            attack = staticmethod(attack.attack)
            bounds = staticmethod(bounds.bounds)
            section = staticmethod(report.section)


        register(Toy())
    ''',
    "config.py": '''
        """Config of the toy experiment."""

        from dataclasses import dataclass, field

        from dpaudit.config import from_mapping, require, section


        @dataclass(frozen=True)
        class Train:
            trials: int = 50
            seed: int = 0

            def __post_init__(self) -> None:
                require(self.trials >= 10, "trials", self.trials, "must be >= 10")


        @dataclass(frozen=True)
        class Size:
            shift: float = 1.0


        @dataclass(frozen=True)
        class Attack:
            pass


        @dataclass(frozen=True)
        class Bounds:
            confidence: float = 0.9


        @dataclass(frozen=True)
        class ToyConfig:
            train: Train = field(default_factory=Train)
            datasets: dict[str, Size] = field(default_factory=dict)
            attack: Attack = field(default_factory=Attack)
            bounds: Bounds = field(default_factory=Bounds)


        def config_from_params(params):
            return from_mapping(ToyConfig, section(params, "toyexp"), "toyexp")
    ''',
    "design/__init__.py": '''
        """File names of the toy experiment."""

        SCORES = "scores.npz"
    ''',
    "train.py": '''
        """Train stage of the toy: draws scores instead of training."""

        import numpy as np

        from dpaudit.experiments.base import Mechanism, TrainManifest
        from dpaudit.data.worlds import draw_worlds
        from dpaudit.experiments.toyexp.design import SCORES
        from dpaudit.io import write_npz


        def train(config, audit, out_dir):
            world = draw_worlds([config.train.seed], config.train.trials, balanced=True)
            shift = config.datasets[audit.dataset].shift
            rng = np.random.default_rng(config.train.seed)
            score = rng.normal(size=len(world)) + shift * world
            write_npz(out_dir / SCORES, {"world": world, "score": score})
            return TrainManifest(
                experiment="toyexp", dataset=audit.dataset, delta=1e-3, sizes={"trials": config.train.trials},
                seeds={"seed": config.train.seed}, mechanisms={"toy": Mechanism.dpsgd(1.0, 0.5, 10, 1.0)},
            )
    ''',
    "losses.py": '''
        """Losses stage of the toy: the scores are the losses."""

        import shutil

        from dpaudit.experiments.toyexp.design import SCORES


        def losses(config, audit, manifest, out_path):
            shutil.copyfile(audit.train_dir / SCORES, out_path)
    ''',
    "attack.py": '''
        """Attack stage of the toy: the scores as one score set (member = world 1)."""

        import numpy as np

        from dpaudit.scores import ScoreSet, write_score_sets


        def attack(config, audit, manifest, out_dir):
            out_dir.mkdir(parents=True, exist_ok=True)
            with np.load(audit.losses_path) as f:
                world, score = f["world"], f["score"]
            s = ScoreSet({"setting": "toy"}, score, world == 1, ("scores",), "none",
                         manifest.mechanisms["toy"].event, {"delta": manifest.delta})
            write_score_sets(out_dir / audit.scores_path.name, [s])
    ''',
    "bounds.py": '''
        """Bounds stage of the toy: the score set audited into the table, plus the accountants' ε."""

        import pandas as pd

        from dpaudit.bounds.accountants import epsilons_for_event
        from dpaudit.bounds.audit import audit_score_sets
        from dpaudit.experiments.base import BoundsResult, finite_number
        from dpaudit.results import SummaryRow
        from dpaudit.scores import read_score_sets
        from dpaudit.table import ResultRow


        def bounds(config, audit, manifest):
            sets = read_score_sets(audit.scores_path)
            table = audit_score_sets(sets, config.bounds.confidence)
            upper = {k: finite_number(v) for k, v in
                     epsilons_for_event(manifest.mechanisms["toy"].dp_event(), manifest.delta).items()}
            table.extend(ResultRow("", "epsilon_upper", v, k, "accountant") for k, v in upper.items())
            best = table.headline()
            auc = table.one("auroc", sets[0].key).value
            row = SummaryRow("toy", upper, best.value, best.estimator, {"auc": auc},
                             epsilon_lower_assumes=best.assumes, confidence=best.level)
            frame = pd.DataFrame({"world": sets[0].member.astype(int), "score": sets[0].scores})
            plots = {"scores.csv": frame}
            return BoundsResult(table.metrics(), plots, [row], table=table)
    ''',
    "report.py": '''
        """Report section of the toy."""

        from dpaudit.results import FigureSpec, ReportSection


        def section(config, audit, manifest, result):
            data = f"plots/{audit.name}/scores.csv"
            figure = FigureSpec("toy-scores", "Scores", "histogram", data, "score", [], "score", "trials",
                                group="world")
            return ReportSection(audit.dataset, "toyexp", "Toy", "A toy.", result.summary[0], result.summary,
                                 [], [figure], scores={"auc": "AUC"})
    ''',
    "smoke.yaml": """
        toyexp:
          train: {trials: 40}
          datasets:
            adult: {shift: 2.0}
          attack: {}
          bounds: {confidence: 0.9}
    """,
}


def test_a_toy_experiment_plugs_in_without_edits_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = tmp_path / "plugins"
    package = search / "toyexp"
    package.mkdir(parents=True)
    for file, text in TOY_FILES.items():
        (package / file).parent.mkdir(parents=True, exist_ok=True)
        (package / file).write_text(textwrap.dedent(text).lstrip())
    monkeypatch.setattr(experiments, "__path__", [*experiments.__path__, str(search)])
    monkeypatch.setattr(experiments, "_REGISTRY", dict(experiments._REGISTRY))
    monkeypatch.setattr(experiments, "_DISCOVERED", set(experiments._DISCOVERED))
    assert "toyexp" in registry()
    check_contract(registry()["toyexp"], tmp_path / "repo")


def test_register_refuses_a_second_experiment_of_the_same_name() -> None:
    """The same package registered again (a re-import) replaces its entry; another package under a
    taken name is refused, naming both; a name that is not an identifier is refused."""
    from dpaudit import experiments
    from dpaudit.experiments.base import PackagedExperiment

    def parse(params: object) -> object:
        return params

    first = PackagedExperiment("dupcheck", "pkg.one", parse)
    try:
        experiments.register(first)
        again = PackagedExperiment("dupcheck", "pkg.one", parse)
        assert experiments.register(again) is again
        with pytest.raises(ValueError, match="two experiments are called 'dupcheck'.*pkg.one.*pkg.two"):
            experiments.register(PackagedExperiment("dupcheck", "pkg.two", parse))
        with pytest.raises(ValueError, match="Python identifier"):
            experiments.register(PackagedExperiment("dup-check", "pkg.three", parse))
    finally:
        experiments._REGISTRY.pop("dupcheck", None)
