"""The identifiability experiment's stage functions end to end on a tiny synthetic dataset."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dpaudit import pipeline
from dpaudit.config import ParamsError
from dpaudit.data.prepared import PreparedData
from dpaudit.experiments import Audit
from dpaudit.experiments.base import read_manifest
from dpaudit.experiments.identifiability import config as ident
from dpaudit.io import read_json
from dpaudit.precision import measured, versioned
from dpaudit.report.figures import load_figure_data
from dpaudit.results import ReportSection
from dpaudit.scores import read_score_sets
from dpaudit.sensitivity.search import (
    BoundedChoice,
    Candidate,
    PairCandidate,
    SensitivityResult,
    UnboundedChoice,
)
from dpaudit.table import ResultsTable

PARAMS = {
    "data": {"datasets": ["adult"]},
    "audits": {"adult-identifiability": {"dataset": "adult", "experiment": "identifiability"}},
    "identifiability": {
        "train": {
            "rho_beta": [0.75, 0.9],
            "trials": 24,
            "epochs": 4,
            "learning_rate": 0.5,
            "candidate_trials": 2,
        },
        "datasets": {"adult": {"hidden": [4]}},
    },
}


def leaves(tree: object) -> list[object]:
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in leaves(value)]
    return [tree]


@pytest.fixture(scope="module")
def audit(tmp_path_factory: pytest.TempPathFactory) -> Audit:
    root = tmp_path_factory.mktemp("ident")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 6)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    idx = rng.permutation(60)
    prepared = PreparedData("adult", "tabular", X, y, 2, tuple(f"f{i}" for i in range(6)),
                            idx[:20], idx[20:40], idx[40:])  # fmt: skip
    a = Audit("adult", "identifiability", root)
    prepared.save(a.prepared_path)
    d, u = [int(i) for i in idx[:20]], [int(i) for i in idx[20:40]]
    sens = SensitivityResult(
        "adult",
        "manhattan",
        UnboundedChoice(d[0], 9.0, [Candidate(d[0], 9.0), Candidate(d[1], 8.0)], [Candidate(d[2], 1.0)]),
        BoundedChoice(d[3], u[0], 7.0, [PairCandidate(d[3], u[0], 7.0)], [PairCandidate(d[4], u[1], 0.5)]),
    )
    sens.save(a.sensitivity_path)
    for run in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        run(PARAMS, a.name, root=root)
    return a


def test_results_table_per_configuration(audit: Audit) -> None:
    """Metrics are the results table: per setting its accountant rows, per adversary its estimators."""
    metrics = read_json(audit.results_path)
    table = ResultsTable.load(audit.results_table_path)
    from_table = versioned(table.metrics())  # results/<audit>.json: at its versioned precision
    assert list(from_table) == list(metrics)
    for group, entry in from_table.items():
        assert list(entry) == list(metrics[group])
        for name, value in entry.items():
            stored = metrics[group][name]
            assert value == (stored if isinstance(value, str) else pytest.approx(stored))
    settings = [
        f"rb{rb}_{s}-{n}" for rb in (0.75, 0.9) for s in ("global", "local") for n in ("bounded", "unbounded")
    ]
    assert sorted(metrics) == sorted(
        f"setting={st}{suffix}" for st in settings for suffix in ("", "/attack=di", "/attack=mi")
    )
    assert all(isinstance(v, int | float | str) for v in leaves(metrics))
    m = metrics["setting=rb0.75_local-bounded"]
    d = metrics["setting=rb0.75_local-bounded/attack=di"]
    assert m["rho_beta"] == 0.75 and 0 <= m["utility"] <= 1
    assert set(m) >= {"epsilon_upper_pld", "epsilon_upper_rdp", "rho_alpha_thm2", "rho_alpha_rdp"}
    assert -1 <= d["advantage_decision_low"] <= d["advantage_decision"] <= d["advantage_decision_high"] <= 1
    # Local sensitivity: every effective multiplier is z, so ε′ (i) is the accountant's ε ≤ target.
    # (an estimate is written at 3 significant digits, the accountant at 6)
    assert d["epsilon_estimate_local_sensitivity"] == measured(m["epsilon_upper_rdp"])
    assert m["epsilon_upper_rdp"] <= math.log(3.0) + 1e-9  # Eq. 10: ε = ln(ρβ/(1−ρβ))
    assert 0 <= d["delta_prime"] <= 1
    # Both adversaries: GDP is the one pre-registered (counted) bound and keeps the whole level; the
    # sweeps are reported uncounted; every valid bound stays below the accountant's ε; ε′ and the
    # naive sweep are estimates.
    for st in settings:
        pld = metrics[f"setting={st}"]["epsilon_upper_pld"]
        assert pld <= metrics[f"setting={st}"]["epsilon_upper_rdp"] + 1e-2
        for adversary in ("di", "mi"):
            group = f"setting={st}/attack={adversary}"
            counted = [r for r in table.select("epsilon_lower", group) if r.counted]
            assert [r.estimator for r in counted] == ["gdp"]
            assert counted[0].level == pytest.approx(0.95) and counted[0].value <= pld + 1e-9
            sweeps = [r for r in table.select("epsilon_lower", group) if r.estimator.startswith("sweep_")]
            assert len(sweeps) == 2 and all(r.value <= pld + 1e-9 and not r.counted for r in sweeps)
            assert table.headline([group]).level == pytest.approx(0.95)
            assert not any(r.counted for r in table.select("epsilon_estimate", group))
            assert table.one("epsilon_estimate", group, estimator="sweep_naive").kind == "estimate"
    g = metrics["setting=rb0.75_global-unbounded/attack=di"]
    assert g["epsilon_estimate_local_sensitivity"] <= d["epsilon_estimate_local_sensitivity"] + 1e-9
    sets = {s.key: s for s in read_score_sets(audit.scores_path)}
    di_set = sets["setting=rb0.75_local-bounded/attack=di"]
    assert di_set.assumes == "gaussian" and int(di_set.member.sum()) == 24 and len(di_set.scores) == 48
    np.testing.assert_array_equal(di_set.arrays["decision"], di_set.scores >= 0)


def test_attack_side_imports_no_bounds_module() -> None:
    """Estimators belong to the bounds stage: the attack stage and the DI adversary import none."""
    import ast

    import dpaudit.attacks.di as di_module
    import dpaudit.experiments.identifiability.attack as attack_module

    for module in (di_module, attack_module):
        tree = ast.parse(Path(module.__file__).read_text())
        names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [n for n in names if n.startswith("dpaudit.bounds")], module.__name__


def test_worlds_and_masks(audit: Audit) -> None:
    with np.load(audit.train_dir / "rb0.9_local-bounded.npz") as f:
        world, mask, rows = f["world"], f["member_mask"], f["tracked_rows"]
    assert mask.shape == (48, 20 + 2)  # D plus the two bounded replacement records
    assert np.all(mask.sum(axis=1) == 20)  # bounded: |D′| = |D|
    x, xp = rows
    assert np.all(mask[world == 1, x]) and not np.any(mask[world == 1, xp])
    assert np.all(mask[world == 0, xp]) and not np.any(mask[world == 0, x])
    assert world.sum() == 24  # balanced worlds: exactly 24 trials on D and 24 on D′
    with np.load(audit.train_dir / "rb0.9_local-unbounded.npz") as f:
        world, mask = f["world"], f["member_mask"]
    assert set(mask.sum(axis=1)[world == 0]) == {19} and set(mask.sum(axis=1)[world == 1]) == {20}


def test_plots_and_section(audit: Audit) -> None:
    section = ReportSection.load(audit.section_path)
    assert section.experiment == "identifiability" and len(section.rows) == 8
    for row in section.rows:  # every accountant side by side; the tight ones never above the loose ones
        upper = row.epsilon_upper
        assert set(upper) == {"rdp", "pld", "naive", "advanced"}
        assert upper["pld"] <= upper["rdp"] + 1e-2 <= min(upper["naive"], upper["advanced"]) + 1e-2
        rho_beta = row.scores["rho_beta"]
        assert upper["rdp"] == pytest.approx(math.log(rho_beta / (1 - rho_beta)), rel=1e-3)
    assert section.scores == {"rho_beta": "ρβ", "rho_alpha": "ρα"} and section.timings["train"] > 0
    table = next(t for t in section.tables if t.id == "bernau-table-2")
    assert len(table.rows) == 4 and "δ′" in table.columns
    root = audit.root
    for fig in section.figures:
        frame = load_figure_data(fig, root)  # the CSV exists and holds every named column
        assert len(frame) > 0
    assert {f.id.split("-", 2)[-1] for f in section.figures} >= {
        "beliefs",
        "candidates",
        "ls-gs",
        "lower-bounds",
    }
    # The headline lower bound is the table's headline of A_DI,Gau's set, with its tag and joint level.
    results = ResultsTable.load(audit.results_table_path)
    for row in section.rows:
        assert row.epsilon_lower is not None and row.epsilon_lower <= row.epsilon_upper["pld"] + 1e-9
        assert row.epsilon_lower_estimator in {"gdp", "sweep_split", "sweep_bonferroni"}
        assert row.epsilon_lower_assumes == ("gaussian" if row.epsilon_lower_estimator == "gdp" else "none")
        assert row.confidence == pytest.approx(0.95)
        rb, key = row.setting.removeprefix("ρβ=").split(" ")
        best = results.headline([f"setting=rb{rb}_{key}/attack=di"])
        assert measured(row.epsilon_lower, "down") == best.value  # the CSV: 3 digits, rounded down
    # The lower-bounds figure draws valid bounds only: no estimate column among its y series.
    bounds_fig = next(f for f in section.figures if f.id.endswith("lower-bounds"))
    assert bounds_fig.y and all(c.startswith("epsilon_lower_") for c in bounds_fig.y)
    assert not any("estimate" in c or "naive" in c or "prime" in c for c in bounds_fig.y)
    table = next(t for t in section.tables if t.id == "lower-bounds")
    assert len(table.rows) == 8 and any("estimate" in c for c in table.columns)
    steps = (audit.plots_dir / "sensitivity_steps.csv").read_text().splitlines()
    assert len(steps) == 1 + 4 * 4  # header + 4 settings × 4 epochs


def test_manifest_records_training_facts(audit: Audit) -> None:
    """The train manifest holds k, C, δ, sizes, seeds and one DP-SGD event per setting (q = 1)."""
    import dp_accounting

    from dpaudit.bounds.accountants import all_epsilons, epsilons_for_event

    manifest = read_manifest(audit)
    assert manifest.experiment == "identifiability" and manifest.dataset == "adult"
    assert (
        manifest.delta == pytest.approx(1 / 20)
        and manifest.sizes["D"] == 20
        and manifest.sizes["trials"] == 48
        and manifest.sizes["trials_per_world"] == 24
    )
    assert (
        manifest.facts["epochs"] == 4 and manifest.facts["clip_norm"] == 3.0 and manifest.seeds == {"seed": 0}
    )
    assert len(manifest.facts["settings"]) == 8 and "candidates" in manifest.mechanisms
    mech = manifest.mechanisms["rb0.75_local-bounded"]
    event = mech.dp_event()
    assert isinstance(event, dp_accounting.SelfComposedDpEvent) and event.count == 4
    assert mech.sampling_rate == 1.0 and mech.clip_norm == 3.0
    assert epsilons_for_event(event, manifest.delta) == all_epsilons(
        mech.noise_multiplier, 1.0, 4, manifest.delta
    )


PLENTIFUL = {
    **PARAMS,
    "identifiability": {
        "train": {
            "rho_beta": [0.99],
            "sensitivities": ["local"],
            "neighbours": ["bounded"],
            "trials": 1000,
            "epochs": 4,
            "learning_rate": 0.5,
            "candidate_trials": 0,
        },
        "datasets": {"adult": {"hidden": [4]}},
    },
}


def test_gdp_bound_is_below_pld_and_above_the_sweep_with_plentiful_trials(
    audit: Audit, tmp_path: Path
) -> None:
    """1000 trials per world at ρβ = 0.99 with local sensitivity (exactly Gaussian, μ = √k/z): the GDP
    bound (Nasr et al. 2023) stays below ε_PLD and beats the threshold sweeps, which spend their
    trials on the δ-tail."""
    import shutil

    root = tmp_path
    small = Audit("adult", "identifiability", root)
    for path in (audit.prepared_path, audit.sensitivity_path):
        target = root / path.relative_to(audit.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    for run in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        run(PLENTIFUL, small.name, root=root)
    metrics = read_json(small.results_path)
    pld = metrics["setting=rb0.99_local-bounded"]["epsilon_upper_pld"]
    di = metrics["setting=rb0.99_local-bounded/attack=di"]
    sets = read_score_sets(small.scores_path)
    assert int(sets[0].member.sum()) == int((~sets[0].member).sum()) == 1000
    gdp = di["epsilon_lower_gdp"]
    assert 0 < gdp <= pld
    assert gdp > di["epsilon_lower_sweep_split"]
    assert gdp > di["epsilon_lower_sweep_bonferroni"]
    assert gdp / pld > 0.5
    section = ReportSection.load(small.section_path)
    assert measured(section.rows[0].epsilon_lower, "down") == gdp
    assert section.rows[0].epsilon_lower_estimator == "gdp"


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ParamsError, match="identifiability.train.trails"):
        ident.config_from_params({"identifiability": {"train": {"trails": 3}}})
    with pytest.raises(ParamsError, match="identifiability.train.rho_beta"):
        ident.config_from_params({"identifiability": {"train": {"rho_beta": [0.4]}}})
    with pytest.raises(ParamsError, match="identifiability.train.neighbours"):
        ident.config_from_params({"identifiability": {"train": {"neighbours": ["bounded", "sideways"]}}})
    with pytest.raises(ParamsError, match=r"'identifiability.datasets.digits.hidden' = \[\]"):
        ident.config_from_params({"identifiability": {"datasets": {"digits": {"hidden": []}}}})
    config = ident.config_from_params({"identifiability": {}})
    assert config.train.rho_beta == [0.52, 0.75, 0.9, 0.99] and config.train.epochs == 30
    own = ident.config_from_params(
        {
            "identifiability": {
                "datasets": {"digits": {"hidden": [8], "learning_rate": 0.5}, "adult": {"hidden": [2]}}
            }
        }
    )
    assert own.learning_rate_for("digits") == 0.5 and own.learning_rate_for("adult") == 0.005


def test_missing_upstream_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="prepared"):
        pipeline.run_train(PARAMS, "adult-identifiability", root=tmp_path)


def test_a_setting_trains_the_same_whatever_its_neighbours_in_the_grid(audit: Audit, tmp_path: Path) -> None:
    """Seeds come from a setting's own values: ρβ = 0.9 alone gives the arrays it gave beside 0.75."""
    import copy
    import shutil

    alone = copy.deepcopy(PARAMS)
    alone["identifiability"]["train"]["rho_beta"] = [0.9]
    other = Audit("adult", "identifiability", tmp_path)
    other.prepared_path.parent.mkdir(parents=True, exist_ok=True)
    other.sensitivity_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(audit.prepared_path, other.prepared_path)
    shutil.copy(audit.sensitivity_path, other.sensitivity_path)
    pipeline.run_train(alone, other.name, root=tmp_path)
    for name in ("rb0.9_local-bounded", "rb0.9_global-unbounded"):
        file = f"{name}.npz"
        with np.load(audit.train_dir / file) as grid, np.load(other.train_dir / file) as one:
            for key in ("world", "dot", "sigma", "param_0"):
                np.testing.assert_array_equal(grid[key], one[key], err_msg=f"{name}: {key}")
