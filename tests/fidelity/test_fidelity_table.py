"""The fidelity table: rules, verdicts, the papers' oracles, and the committed table being current."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpaudit.fidelity import Measured, ProfileResult, write_profile_result
from dpaudit.fidelity.claims import CLAIMS, Rule
from dpaudit.fidelity.evidence import Evidence, Observed
from dpaudit.fidelity.papers import FIDELITY_RESULTS
from dpaudit.fidelity.profiles import PROFILE_MODULES
from dpaudit.fidelity.table import (
    FIDELITY_CSV,
    FIDELITY_PAGE,
    fidelity_markdown,
    fidelity_rows,
    read_fidelity_csv,
    write_fidelity_csv,
)
from dpaudit.references import REFERENCES


def _observed(value: float, low: float | None = None, high: float | None = None) -> Observed:
    interval = "95 % CI" if low is not None else ""
    return Observed(value, "test", True, "test", "test", low, high, interval=interval)


def test_rules_near_at_least_at_most() -> None:
    near = Rule("near", 0.05, "test")
    assert near.holds(0.17, _observed(0.21))
    assert not near.holds(0.17, _observed(0.266, 0.205, 0.326))  # Bernau's adult Adv: outside both
    assert near.holds(0.17, _observed(0.30, 0.15, 0.40))  # the paper's number inside the interval
    assert Rule("at_least", 0.0, "test").holds(50.0, _observed(123.0))
    assert not Rule("at_least", 0.0, "test", upper=100.0).holds(50.0, _observed(123.0))
    assert not Rule("at_least", 0.0, "test").holds(50.0, _observed(49.0))
    assert Rule("at_most", 0.0, "test").holds(0.3, _observed(0.29))
    assert not Rule("at_most", 0.0, "test").holds(0.3, _observed(1.18))  # Negoescu's "all below 0.3" on adult


def test_every_paper_result_has_one_claim_and_real_sources() -> None:
    keys = [r.key for r in FIDELITY_RESULTS]
    assert len(keys) == len(set(keys))
    assert {c.result for c in CLAIMS} == set(keys)
    assert {r.paper for r in FIDELITY_RESULTS} >= {"NASR_2021", "BERNAU", "ERLINGSSON", "NEGOESCU", "AERNI"}
    assert all(r.paper in REFERENCES for r in FIDELITY_RESULTS)
    assert any(r.paper == "STEINKE_NASR_JAGIELSKI" for r in FIDELITY_RESULTS)


def test_clopper_pearson_cap_is_the_papers_5_60(repo_root: Path) -> None:
    """Nasr et al. §III: 1000 trials, all correct, cannot certify more than ε = 5.60 at 95 %."""
    row = next(r for r in fidelity_rows(Evidence(repo_root)) if r.result == "nasr-cp-cap")
    assert row.dpaudit_value == pytest.approx(5.60, abs=0.005)
    assert row.verdict == "reproduced"


def _audit_file(root: Path, audit: str, groups: dict) -> None:
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / f"{audit}.json").write_text(json.dumps(groups))


def test_verdicts_from_constructed_results(tmp_path: Path) -> None:
    ci = {"advantage_decision_low": 0.12, "advantage_decision_high": 0.24}
    _audit_file(tmp_path, "adult-identifiability", {
        "setting=rb0.9_local-bounded/attack=di": {"advantage_decision": 0.18, "delta_prime": 0.5, **ci},
        "setting=rb0.9_local-unbounded/attack=di": {"advantage_decision": 0.18, **ci},
    })  # fmt: skip
    write_profile_result(
        tmp_path / "reproductions",
        ProfileResult(
            "negoescu-adult", "NEGOESCU", "s", "d",
            {"epsilon_star_largest": Measured(0.9, "Epsilon*", "estimate")},
        ),
    )  # fmt: skip
    rows = {r.result: r for r in fidelity_rows(Evidence(tmp_path)) if r.role == "decides"}
    assert rows["bernau-adv-ls-bounded"].verdict == "reproduced"  # pooled 0.18 vs 0.17 ± 0.05
    assert rows["bernau-delta-prime"].verdict == "differs"  # 0.5: above δ
    assert rows["negoescu-adult-max"].verdict == "differs"  # 0.9 > 0.3 (no weaker statement of the paper)
    assert rows["nasr-f"].verdict == "missing"  # no instantiation results here
    assert rows["steinke-one-run"].verdict == "missing"


def test_csv_round_trip(tmp_path: Path, repo_root: Path) -> None:
    rows = fidelity_rows(Evidence(repo_root))
    write_fidelity_csv(rows, tmp_path / "f.csv")
    back = read_fidelity_csv(tmp_path / "f.csv")
    assert [r.verdict for r in back] == [r.verdict for r in rows]
    assert [r.result for r in back] == [r.result for r in rows]


def test_committed_table_is_current_and_backed(repo_root: Path) -> None:
    """The committed CSV and page are what the committed results give (`dvc repro fidelity` was run),
    and every "reproduced" row names a committed file or a closed form of the library."""
    evidence = Evidence(repo_root)
    rows = fidelity_rows(evidence)
    committed = read_fidelity_csv(repo_root / FIDELITY_CSV)

    def key(r):
        return (r.result, r.verdict, r.source)

    assert [key(r) for r in committed] == [key(r) for r in rows]
    assert (repo_root / FIDELITY_PAGE).read_text() == fidelity_markdown(rows, evidence)
    for row in rows:
        if row.verdict == "reproduced" and row.source.startswith("results/"):
            assert (repo_root / row.source.split(":")[0]).is_file(), row


def test_profiles_registered_have_modules(repo_root: Path) -> None:
    for name, module in PROFILE_MODULES.items():
        path = repo_root / "src" / (module.replace(".", "/") + ".py")
        assert path.is_file(), f"profile {name}: {path} missing"


def test_report_section_draws_every_row(repo_root: Path, tmp_path: Path) -> None:
    from dpaudit.report.fidelity import fidelity_section

    page = fidelity_section(repo_root)
    rows = read_fidelity_csv(repo_root / FIDELITY_CSV)
    assert page.count("data-verdict=") == len(rows)
    assert 'data-verdict="reproduced"' in page
    assert "is missing: run dvc repro fidelity" in fidelity_section(tmp_path)
