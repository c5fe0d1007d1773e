"""The one-run estimators: counted only where their assumption is guaranteed, level split once."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.bounds.audit import audit_score_sets
from dpaudit.bounds.onerun import audit_one_run
from dpaudit.scores import ScoreSet


def _set(assumes: str, inclusion: float = 0.5) -> ScoreSet:
    rng = np.random.default_rng(4)
    member = rng.random(500) < 0.5
    return ScoreSet(
        {"canary_type": "gradient"},
        rng.normal(size=500) + 3.0 * member,
        member,
        ("one_run_steinke", "one_run_fdp_gaussian"),
        assumes,
        params={"delta": 1e-5, "inclusion_probability": inclusion, "seed": 9},
    )


@pytest.mark.parametrize(
    ("assumes", "level", "fdp_counted"), [("gaussian", 0.975, True), ("one-run", 0.95, False)]
)
def test_one_run_rows_match_the_analysis_at_the_split_level(
    assumes: str, level: float, fdp_counted: bool
) -> None:
    s = _set(assumes)
    table = audit_score_sets([s], 0.95)
    steinke = table.one("epsilon_lower", s.key, estimator="one_run_steinke")
    fdp = table.one("epsilon_lower", s.key, estimator="one_run_fdp_gaussian")
    direct = audit_one_run(s.scores, s.member, delta=1e-5, confidence=level, analysis="steinke", seed=9)
    assert steinke.value == pytest.approx(direct.epsilon_lower) and steinke.value > 1.0
    assert steinke.counted and steinke.level == pytest.approx(level) and steinke.assumes == "one-run"
    assert fdp.counted == fdp_counted and fdp.level == pytest.approx(0.975 if fdp_counted else 0.95)
    assert fdp.value > steinke.value  # the Gaussian family is much tighter on Gaussian scores
    best = table.headline()
    assert best.level == pytest.approx(0.95)
    assert best.estimator == ("one_run_fdp_gaussian" if fdp_counted else "one_run_steinke")


def test_one_run_refuses_another_inclusion_probability() -> None:
    with pytest.raises(ValueError, match="probability 1/2"):
        audit_score_sets([_set("one-run", inclusion=0.3)], 0.95)
