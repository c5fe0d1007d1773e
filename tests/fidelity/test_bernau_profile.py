"""The bernau-candidates profile: registration, the label finding and a tiny end-to-end run."""

from __future__ import annotations

import pandas as pd
import pytest

from dpaudit.fidelity.profiles import bernau, get_profile


def test_registered_for_bernau() -> None:
    profile = get_profile("bernau-candidates")
    assert profile.paper == "BERNAU" and profile.run is bernau.run
    assert bernau.PAPER_TRIALS == 250 and bernau.PAPER_ADV == {"bounded": 0.17, "unbounded": 0.22}


def test_label_finding_compares_label_flips_with_label_sharing_pairs() -> None:
    summary = pd.DataFrame(
        {
            "neighbours": ["bounded", "bounded", "bounded", "unbounded"],
            "end": ["top", "bottom", "bottom", "top"],
            "rank": [1, 1, 2, 1],
            "mean_ls": [2.3, 4.0, 1e-5, 9.0],
        }
    )
    labels = {("bounded", "top", 1): (0, 1), ("bounded", "bottom", 1): (1, 0),
              ("bounded", "bottom", 2): (1, 1), ("unbounded", "top", 1): (1,)}  # fmt: skip
    (sentence,) = bernau._label_findings(summary, labels)
    assert "(top 1, bottom 1)" in sentence and "≥ 2.3" in sentence and "(1) ≤ 1e-05" in sentence
    same_only = {key: (0, 0) if key[0] == "bounded" else value for key, value in labels.items()}
    assert bernau._label_findings(summary, same_only) == []


@pytest.mark.slow
def test_tiny_run_has_the_stable_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two trials per candidate (8 Adv^DI runs per neighbourhood): every key present, flags 0 or 1."""
    monkeypatch.setenv(bernau.TRIALS_ENV, "2")
    result = bernau.run(0)
    numbers = result.numbers
    for nb in ("bounded", "unbounded"):
        assert numbers[f"{nb}_top_above_bottom"].value in (0.0, 1.0)
        assert numbers[f"{nb}_top_above_bottom"].kind == "flag"
        assert numbers[f"adv_di_local_{nb}"].n == 8 and numbers[f"adv_di_local_{nb}"].kind == "rate"
        assert numbers[f"{nb}_top_1_mean_ls"].n == 2
    assert numbers["top_above_bottom"].value == min(numbers[f"{nb}_top_above_bottom"].value
                                                    for nb in ("bounded", "unbounded"))  # fmt: skip
    assert numbers["adv_di_local_bounded_expected"].value == pytest.approx(0.2635, abs=1e-3)
    assert "2 trials per candidate" in result.differs and result.paper == "BERNAU"
