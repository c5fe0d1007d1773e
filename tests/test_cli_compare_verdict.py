"""``dpaudit compare`` with a training audit's verdict: a changed verdict comes first."""

from __future__ import annotations

from typing import Any

from tests.test_cli_compare import (  # noqa: F401  (dvc_payload is a fixture)
    BASELINE,
    PARAMS,
    README_EXP,
    WIDTH,
    _json,
    _payload,
    _text,
    _with,
    dvc_payload,
)


def _training(caught: float, lower: float, detectable: float = 41.0) -> dict[str, Any]:
    """A training audit's summary entry: its verdict as numbers."""
    return {
        "epsilon_upper": {"pld": 2.0, "rdp": 2.21},
        "epsilon_lower": lower,
        "epsilon_lower_level": 0.95,
        "epsilon_lower_assumes": "none",
        "epsilon_claimed": 2.0,
        "epsilon_detectable": detectable,
        "caught": caught,
        "utility": {"test accuracy": 0.81},
    }


def test_a_changed_verdict_comes_first_even_where_its_numbers_barely_move(
    dvc_payload: Any, capsys: Any  # noqa: F811
) -> None:
    base = {**BASELINE, "digits-training_audit": _training(0.0, 0.0312)}
    buggy = {**README_EXP, "digits-training_audit": _training(1.0, 0.0312)}  # same ε proven, now caught
    params = _with(PARAMS, membership__train__seed=1)
    dvc_payload(_payload([("noisy-bug", "2026-11-28T05:00:00", params, buggy)], baseline=(PARAMS, base)))
    lines = _text(capsys)
    assert max(map(len, lines)) <= WIDTH
    assert lines[0].startswith("VERDICT CHANGED digits-training_audit (claimed ε 2.00): caught in noisy-bug")
    assert lines[0].endswith("; not in main")
    groups = lines[1].split()
    assert groups[0] == "digits-training_audit"  # its group before the identifiability audits
    result = _json(capsys)
    assert result["audits"][0] == "digits-training_audit"
    heads = [r["headlines"]["digits-training_audit"] for r in result["experiments"]]
    assert [h["caught"] for h in heads] == [False, True]


def test_no_verdict_line_where_no_verdict_changed(dvc_payload: Any, capsys: Any) -> None:  # noqa: F811
    base = {**BASELINE, "digits-training_audit": _training(1.0, 0.0312)}
    again = {**README_EXP, "digits-training_audit": _training(1.0, 0.5)}
    dvc_payload(_payload([("still-bug", "2026-11-28T05:00:00", PARAMS, again)], baseline=(PARAMS, base)))
    lines = _text(capsys)
    assert not any(line.startswith("VERDICT CHANGED") for line in lines)
    audits = _json(capsys)["audits"]  # its ε proven moved: an ordinary changed headline, in its place
    assert audits == ["adult-identifiability", "digits-identifiability", "digits-training_audit"]
