"""The fidelity table's rules, as a reviewer signs them.

Two kinds of test. :func:`test_every_verdict_recomputed_from_the_committed_numbers` recomputes every
row's verdict from the committed numbers (results/, reproductions/) with a second, independent
implementation of the rules written here (:func:`_expected_verdict`), and the headline from the
deciding rows. The ``test_rule_*`` tests each build a case the first table's rules passed
(:func:`_old_verdict` is that table's verdict logic, kept here as the reference) and check that the
rule now refuses it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from dpaudit.fidelity.claims import CLAIMS, Claim, Rule
from dpaudit.fidelity.evidence import INTERVALS, Evidence, Observed
from dpaudit.fidelity.papers import ADDED_RESULTS, FIDELITY_RESULTS, PLACES
from dpaudit.fidelity.power import eq5_at, trials_needed
from dpaudit.fidelity.table import (
    FIDELITY_CSV,
    claim_verdicts,
    counts_text,
    fidelity_rows,
    judge,
    read_fidelity_csv,
)

PAPERS = Path("/work/shared/papers")


def _obs(value, *, low=None, high=None, interval="", role="paper", needed=None, trials=None) -> Observed:
    same = role != "beyond"
    return Observed(value, "test", same, "test", "test", low, high, interval, needed, role, trials)


def _old_verdict(rule: Rule, qualitative, paper: float, observed: Observed) -> str:
    """The first table's verdict (584ba02): ±tolerance or *any* interval containing the paper,
    one-sided ``≥`` / ``≤`` without a second side, the weaker statement without a floor."""
    if rule.kind == "at_least":
        holds = observed.value >= paper - rule.tolerance
    elif rule.kind == "at_most":
        holds = observed.value <= paper + rule.tolerance
    else:
        low, high = observed.low, observed.high
        inside = low is not None and high is not None and low <= paper <= high
        holds = inside or abs(observed.value - paper) <= rule.tolerance
    if holds:
        return "reproduced"
    if qualitative is not None and qualitative(observed):
        return "qualitatively"
    return "differs"


def _old_claim_verdict(verdicts: list[str]) -> str:
    """The first table's headline: the best row of each claim."""
    order = ("reproduced", "qualitatively", "differs", "missing")
    return min(verdicts, key=order.index)


def _claim_of(key: str) -> Claim:
    return next(c for c in CLAIMS if c.result == key)


def _claim(**kwargs) -> Claim:
    base = {"result": "test", "quantity": "q", "sources": (), "rule": Rule("near", 0.05, "test")}
    return Claim(**{**base, **kwargs})


# ------------------------------------------------------------------------- the committed table, recomputed


def _expected_verdict(claim: Claim, paper: float | None, o: Observed | None) -> str:
    """The rules of the issue, written out again: not table.judge."""
    if o is None:
        return "missing"
    if o.role == "beyond":
        return "beyond the paper"
    r = claim.rule
    if paper is None and r.kind != "statement":
        return "missing"
    v = o.value
    positive = claim.floor is None or v > claim.floor
    ci = o.low is not None and o.high is not None and "CI" in o.interval
    contains = ci and paper is not None and o.low <= paper <= o.high
    if r.kind == "statement":
        ok = r.statement(v)
    elif r.kind == "near":
        ok = abs(v - paper) <= r.tolerance or contains
    elif r.kind == "factor":
        ok = v > 0 and (abs(math.log(v / paper)) <= math.log(r.tolerance) + 1e-12 or contains)
    elif r.kind == "at_least":
        ok = v >= paper - r.tolerance and (r.upper is None or v <= r.upper)
    elif r.kind == "at_most":
        ok = v <= paper + r.tolerance and (r.refuse_below is None or v >= r.refuse_below)
    else:
        ok = v == paper
    if positive and ok:
        return "reproduced"
    if o.needed is not None and o.needed != math.inf and (o.trials is None or o.needed > o.trials):
        return "not reached"
    if positive and claim.holds_qualitatively is not None and claim.holds_qualitatively(o):
        return "qualitatively"
    return "differs"


def test_every_verdict_recomputed_from_the_committed_numbers(repo_root: Path) -> None:
    evidence = Evidence(repo_root)
    rows = fidelity_rows(evidence)
    results = {r.key: r for r in FIDELITY_RESULTS}
    expected: list[tuple[str, str, str]] = []
    for claim in CLAIMS:
        result = results[claim.result]
        paper = None if result.value is None else result.value / claim.paper_scale
        present = [o for o in (s(evidence) for s in claim.sources) if o is not None]
        deciding = next((o for o in present if o.role == "paper"), None)
        if deciding is None:
            expected.append((claim.result, "decides", "missing"))
        for o in present:
            role = "decides" if o is deciding else ("beyond" if o.role == "beyond" else "also")
            expected.append((claim.result, role, _expected_verdict(claim, paper, o)))
    got = sorted((r.result, r.role, r.verdict) for r in rows)
    assert got == sorted(expected)
    # The headline counts each claim once, by its deciding row.
    verdicts = claim_verdicts(rows)
    assert set(verdicts) == {c.result for c in CLAIMS}
    for name in ("reproduced", "qualitatively", "not reached", "differs", "missing"):
        n = sum(1 for claim, role, v in expected if role == "decides" and v == name)
        assert f"{n} {name}" in counts_text(rows)
    # The committed CSV holds the same verdicts.
    committed = read_fidelity_csv(repo_root / FIDELITY_CSV)
    assert sorted((r.result, r.role, r.verdict) for r in committed) == got


def test_acceptance_on_the_committed_table(repo_root: Path) -> None:
    rows = fidelity_rows(Evidence(repo_root))
    claims = {c.result: c for c in CLAIMS}
    for row in rows:
        claim = claims[row.result]
        # No lower bound, rate or advantage passes at or below its floor.
        if claim.floor is not None and row.dpaudit_value is not None and row.dpaudit_value <= claim.floor:
            assert row.verdict not in ("reproduced", "qualitatively"), row
        # The deciding row is the paper's estimator; beyond rows are never judged.
        if row.role == "decides" and row.dpaudit_value is not None:
            assert row.same_estimator == "yes", row
        if row.role == "beyond":
            assert row.verdict == "beyond the paper", row
        # Limits always say what they are.
        if row.dpaudit_low is not None or row.dpaudit_high is not None:
            assert row.interval in INTERVALS, row
    # At least 12 added rows, each with its source file and key (or what it needs).
    added = {r.key for r in ADDED_RESULTS}
    backed = [r for r in rows if r.result in added and (r.source or r.dpaudit_estimator.startswith("needs"))]
    assert len(backed) >= 12
    assert all(":" in r.source or r.source.startswith("dpaudit.") for r in backed if r.source)
    # Nasr A–D are decided at the paper's 1000 trials per world.
    for key in ("nasr-a", "nasr-c", "nasr-d"):
        row = next(r for r in rows if r.result == key and r.role == "decides")
        assert row.dpaudit_value is None or (row.trials or 0) >= 1000, row


def test_every_rule_says_why_and_every_statement_is_placed() -> None:
    for claim in CLAIMS:
        assert claim.rule.why.strip(), claim.result
        if claim.qualitative:
            assert claim.qualitative_where, claim.result
    with pytest.raises(ValueError, match="why"):
        Rule("near", 0.05, " ")
    with pytest.raises(ValueError, match="the paper's, with its place"):
        _claim(qualitative="ratio < 0.25", holds_qualitatively=lambda o: o.value < 0.25)


# -------------------------------------------------------------------------------- one test per rule


def test_rule_the_papers_estimator_decides() -> None:
    """Nasr E: the paper's Eq. 5 gives 0.043 against 0.3, a family bound 0.39. The old headline took
    the best row (reproduced); the claim's verdict is its paper-estimator row's."""
    claim = _claim(rule=Rule("near", 0.1, "test"), floor=0.0)
    paper_row, family_row = _obs(0.043), _obs(0.39, role="beyond")
    old = _old_claim_verdict([_old_verdict(claim.rule, None, 0.3, o) for o in (paper_row, family_row)])
    assert old == "reproduced"
    assert judge(claim, 0.3, paper_row) == "differs"
    assert judge(claim, 0.3, family_row) == "beyond the paper"


def test_rule_no_null_result_passes_a_qualitative_statement() -> None:
    """Nasr A at 100 trials: ε_LB = 0 met the old 'ratio < 0.25'. At the floor it is never qualitatively."""
    qualitative = lambda o: o.value < 0.25  # noqa: E731
    claim = _claim(qualitative="x", qualitative_where="§IV-A", holds_qualitatively=qualitative, floor=0.0)
    zero = _obs(0.0)
    assert _old_verdict(claim.rule, qualitative, 0.0775, zero) == "qualitatively"
    assert judge(claim, 0.0775, zero) == "differs"
    for key in ("nasr-a", "nasr-c", "nasr-d", "nasr-d-minus-c", "erlingsson-tpr-weak-noise"):
        assert judge(_claim_of(key), 0.0775, _obs(_claim_of(key).floor)) in ("differs", "not reached"), key


def test_rule_not_reached_states_the_count() -> None:
    """A bound of 0 whose attack would reach the paper's number at more trials is 'not reached'; a count
    the run already had is no excuse."""
    claim = _claim(floor=0.0)
    assert _old_verdict(claim.rule, None, 0.0775, _obs(0.0, needed=3000, trials=1000)) == "differs"
    assert judge(claim, 0.0775, _obs(0.0, needed=3000, trials=1000)) == "not reached"
    assert judge(claim, 0.0775, _obs(0.0, needed=800, trials=1000)) == "differs"
    assert judge(claim, 0.0775, _obs(0.0, needed=math.inf, trials=1000)) == "differs"


def test_rule_one_sided_tolerance_refuses_degenerate_values() -> None:
    """Erlingsson at the strongest noise: TPR exactly 0 at 5 % FPR passed the old '≤ 0.07'."""
    rule = Rule("at_most", 0.02, "test", refuse_below=0.03)
    assert _old_verdict(Rule("at_most", 0.02, "test"), None, 0.05, _obs(0.0)) == "reproduced"
    assert judge(_claim(rule=rule), 0.05, _obs(0.0)) == "differs"
    assert judge(_claim(rule=rule), 0.05, _obs(0.054)) == "reproduced"
    claim = _claim_of("erlingsson-tpr-strong-noise")
    assert claim.rule.refuse_below is not None and judge(claim, 0.05, _obs(0.0)) == "differs"


def test_rule_at_least_has_an_upper_limit() -> None:
    """Aerni's 'as much as fifty': 166 passed the old '≥ paper'."""
    rule = Rule("at_least", 0.0, "test", upper=100.0)
    assert _old_verdict(Rule("at_least", 0.0, "test"), None, 50.0, _obs(166.0)) == "reproduced"
    assert judge(_claim(rule=rule), 50.0, _obs(166.0)) == "differs"
    assert judge(_claim(rule=rule), 50.0, _obs(72.7)) == "reproduced"
    claim = _claim_of("aerni-underestimate")
    assert claim.rule.upper is not None and judge(claim, 50.0, _obs(166.0)) != "reproduced"


def test_rule_only_confidence_intervals_contain() -> None:
    """D − C = 0.012 ± 0.01 (s.e.): the old rule let any interval contain the paper's 0.06."""
    se = _obs(0.04, low=0.0, high=0.08, interval="±1 s.e.")
    spread = _obs(0.04, low=0.0, high=0.08, interval="min–max over seeds")
    ci = _obs(0.04, low=0.0, high=0.08, interval="95 % CI")
    claim = _claim(rule=Rule("near", 0.01, "test"))
    assert _old_verdict(claim.rule, None, 0.06, se) == "reproduced"
    assert judge(claim, 0.06, se) == "differs"
    assert judge(claim, 0.06, spread) == "differs"
    assert judge(claim, 0.06, ci) == "reproduced"
    with pytest.raises(ValueError, match="labelled"):
        _obs(0.04, low=0.0, high=0.08)


def test_rule_delta_prime_is_judged_by_the_papers_statement() -> None:
    """Bernau: δ′ = 0.004 against δ = 0.001 passed the old ±0.01 around the printed 0."""
    statement = Rule("statement", 0.0, "test", statement=lambda v: v <= 0.001, statement_text="δ′ ≤ δ")
    assert _old_verdict(Rule("near", 0.01, "test"), None, 0.0, _obs(0.004)) == "reproduced"
    assert judge(_claim(rule=statement), 0.0, _obs(0.004)) == "differs"
    assert judge(_claim(rule=statement), 0.0, _obs(0.001)) == "reproduced"
    assert judge(_claim_of("bernau-delta-prime"), 0.0, _obs(0.004)) == "differs"


def test_rule_bounded_and_unbounded_advantages_share_one_number(repo_root: Path) -> None:
    """With LS noise both neighbourhoods have one expected advantage: both cells are decided by the same
    pooled number, not by two draws of it (0.266 'differs', 0.226 'reproduced')."""
    rows = [r for r in fidelity_rows(Evidence(repo_root)) if r.role == "decides"]
    bounded = next(r for r in rows if r.result == "bernau-adv-ls-bounded")
    unbounded = next(r for r in rows if r.result == "bernau-adv-ls-unbounded")
    assert bounded.dpaudit_value == unbounded.dpaudit_value
    assert bounded.source == unbounded.source
    assert bounded.interval == "95 % CI"


def test_rule_the_modified_crafter_does_not_decide_d_minus_c(repo_root: Path) -> None:
    """nasr-d-minus-c is decided by Crafter 3 as the paper lists it; the clipped one is beyond."""
    rows = [r for r in fidelity_rows(Evidence(repo_root)) if r.result == "nasr-d-minus-c"]
    clipped = [r for r in rows if "clipped_query" in r.source]
    assert clipped and all(r.role == "beyond" for r in clipped)
    decides = next(r for r in rows if r.role == "decides")
    assert "clipped" not in decides.source


# ------------------------------------------------------------------------------------------- the count


def test_trials_needed_reproduces_the_papers_own_numbers() -> None:
    """Nasr et al. §IV-A: TPR 0.017 at FPR 0.002 over 1000 trials gives 0.31 (Eq. 5: 0.32); the CP
    cap of 1000 all-correct trials is 5.60, so 5.6 needs 1000 trials and 5.7 more."""
    assert eq5_at(0.002, 0.983, 1000, 1e-5) == pytest.approx(0.32, abs=0.01)
    assert trials_needed(0.002, 0.983, 0.31, 1e-5) <= 1000
    assert trials_needed(0.0, 0.0, 5.6, 1e-5) == 1000
    assert trials_needed(0.0, 0.0, 5.7, 1e-5) > 1000
    assert trials_needed(0.3, 0.6, 0.5, 1e-5) is None  # the plug-in Eq. 4 (0.29) is below 0.5


# ------------------------------------------------------------------------------------------- places


def test_places_corrected() -> None:
    where = {r.key: r.where for r in FIDELITY_RESULTS}
    assert where["negoescu-adult-max"].startswith("§4.2")
    assert "Fig. 8" in where["nasr-f"]
    assert "§IV-D" in where["nasr-c"]
    assert all("§" not in w for k, w in where.items() if k.startswith("aerni"))
    assert set(PLACES) <= set(where)


@pytest.mark.skipif(not PAPERS.is_dir(), reason="the paper texts are not on this machine")
def test_places_against_the_paper_texts() -> None:
    nasr = (PAPERS / "nasr-adversary-instantiation.txt").read_text()
    section_d = nasr[nasr.index("D. Adaptive Poisoning Attack") : nasr.index("E. Gradient attack")]
    assert "compared to 0.25 in the prior section" in section_d  # C's 0.25 is stated in §IV-D
    table_i = nasr[nasr.index("Section\tExperiment") : nasr.index("TABLE I")]
    assert re.search(r"§ IV-F\s.*Fig\. 8", table_i)  # the malicious dataset's figure is Fig. 8
    negoescu = (PAPERS / "negoescu-epsilon-star.txt").read_text()
    results = negoescu[negoescu.index("4.2 Results") : negoescu.index("5 Conclusion")]
    assert "below 0.3" in results  # "all below 0.3" is in §4.2
    aerni = (PAPERS / "aerni-misleading-privacy-evaluations.txt").read_text()
    assert not re.search(r"^\s*\d+(\.\d+)*\s+[A-Z]", aerni, re.M)  # no numbered sections
    assert "factor of fifty" in aerni
    bernau = (PAPERS / "bernau-quantifying-identifiability.txt").read_text()
    table2 = bernau[bernau.index("Table 2: Overview of experiments") :][:1500]
    assert "GS B 0.18 0 0.1 0 0.13 0" in table2 and "U 0.27 0.004 0.24 0.001 0.18 0" in table2
