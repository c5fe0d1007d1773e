"""``dpaudit one-run-bound`` (old spelling ``one-run``, hidden): the verdict, both analyses with their
assumptions, and bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpaudit.bounds.onerun import ASSUMPTIONS, audit_one_run, gdp_mu_for_epsilon
from dpaudit.cli import main


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    included = rng.random(1000) < 0.5
    scores = rng.normal(size=1000) + gdp_mu_for_epsilon(4.0, 1e-5) * included
    np.save(tmp_path / "s.npy", scores)
    np.savetxt(tmp_path / "inc.csv", included.astype(int), header="included", comments="", fmt="%d")
    return tmp_path / "s.npy", tmp_path / "inc.csv", scores, included


def test_text_output_has_verdict_and_both_assumptions(files, capsys) -> None:
    s, inc, scores, included = files
    assert main(["one-run-bound", "--scores", str(s), "--included", str(inc), "--delta", "1e-5"]) == 0
    out = capsys.readouterr().out.splitlines()
    expected = audit_one_run(scores, included, delta=1e-5).epsilon_lower
    assert out[0].startswith(f"PROVEN: ε ≥ {expected:.3g} at δ = 1e-05, 95 % confidence (steinke")
    assert any(ASSUMPTIONS["fdp_gaussian"] in line for line in out)
    assert len(out) <= 24


def test_json_matches_the_library(files, capsys) -> None:
    s, inc, scores, included = files
    argv = ["one-run-bound", "--scores", str(s), "--included", str(inc), "--delta", "1e-5", "--json"]
    assert main([*argv, "--analysis", "fdp_gaussian", "--confidence", "0.9"]) == 0
    result = json.loads(capsys.readouterr().out)
    audit = audit_one_run(scores, included, delta=1e-5, confidence=0.9, analysis="fdp_gaussian")
    assert list(result["bounds"]) == ["fdp_gaussian"]
    assert result["bounds"]["fdp_gaussian"]["epsilon_lower"] == pytest.approx(audit.epsilon_lower)
    assert result["included"] == int(included.sum())


def test_null_scores_prove_nothing(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(1)
    np.save(tmp_path / "s.npy", rng.normal(size=500))
    np.save(tmp_path / "i.npy", (rng.random(500) < 0.5).astype(float))
    argv = ["one-run-bound", "--scores", str(tmp_path / "s.npy"), "--included", str(tmp_path / "i.npy")]
    assert main([*argv, "--delta", "1e-5"]) == 0
    assert capsys.readouterr().out.startswith("NOTHING PROVEN at 95 %")


def test_bad_included_exits_2_naming_the_argument(files, tmp_path: Path, capsys) -> None:
    s, _, _, _ = files
    np.save(tmp_path / "bad.npy", np.full(1000, 0.5))
    np.save(tmp_path / "short.npy", np.ones(10))
    for bad, message in (("bad.npy", "only 0 and 1"), ("short.npy", "holds 10 values")):
        with pytest.raises(SystemExit) as exc:
            main(["one-run-bound", "--scores", str(s), "--included", str(tmp_path / bad), "--delta", "1e-5"])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "argument --included" in err and message in err


def test_claimed_epsilon_turns_the_first_line_into_a_verdict(files, capsys) -> None:
    from dpaudit.training_audit.power import detectable_epsilon

    s, inc, scores, included = files  # an ideal game at true ε = 4
    argv = ["one-run-bound", "--scores", str(s), "--included", str(inc), "--delta", "1e-5"]
    argv += ["--analysis", "steinke"]
    assert main([*argv, "--claimed-epsilon", "0.5"]) == 1  # a violation fails a CI job
    bound = audit_one_run(scores, included, delta=1e-5).epsilon_lower
    assert bound > 0.5
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"VIOLATION PROVEN: ε ≥ {bound:.3g} > claimed 0.5 (95 %, steinke")
    assert out[1].startswith("next: ")
    assert main([*argv, "--claimed-epsilon", "4", "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)["verdict"]
    assert verdict["status"] == "no violation found" and verdict["caught"] is False
    expected = detectable_epsilon(4.0, 1e-5, 1000, confidence=0.95)
    assert 4.0 < verdict["detectable_epsilon"] == pytest.approx(expected)
    assert main([*argv, "--claimed-epsilon", "4"]) == 0
    assert capsys.readouterr().out.startswith(f"no violation found: ε ≥ {bound:.3g} does not exceed")
    assert main([*argv, "--claimed-epsilon", "40"]) == 0
    assert "not even a perfect attack" in capsys.readouterr().out.splitlines()[0]


def test_an_inclusion_vector_that_no_fair_coin_drew_is_named(tmp_path: Path, capsys) -> None:
    """All ones (code that never drew) used to give a bare NOTHING PROVEN; a fair draw gives no warning."""
    rng = np.random.default_rng(2)
    np.save(tmp_path / "s.npy", rng.normal(size=500))
    np.save(tmp_path / "ones.npy", np.ones(500))
    np.save(tmp_path / "fair.npy", (rng.random(500) < 0.5).astype(float))
    base = ["one-run-bound", "--scores", str(tmp_path / "s.npy"), "--delta", "1e-5", "--included"]
    assert main([*base, str(tmp_path / "ones.npy")]) == 0
    out = capsys.readouterr().out
    assert "warning: --included: 500 of 500 canaries included" in out and "probability 1/2" in out
    assert main([*base, str(tmp_path / "fair.npy")]) == 0
    assert "warning" not in capsys.readouterr().out


def test_json_uses_the_library_names(files, capsys) -> None:
    """The verdict's keys are Verdict.as_dict's, each bound's are OneRunAudit's fields."""
    import dataclasses

    from dpaudit.bounds.onerun import OneRunAudit
    from dpaudit.training_audit.verdict import VIOLATION

    s, inc, _, _ = files
    argv = ["one-run-bound", "--scores", str(s), "--included", str(inc), "--delta", "1e-5", "--json"]
    assert main([*argv, "--claimed-epsilon", "0.5"]) == 1
    result = json.loads(capsys.readouterr().out)
    verdict = result["verdict"]
    assert verdict["status"] == VIOLATION and verdict["caught"] is True
    assert {
        "claimed_epsilon",
        "epsilon_lower",
        "detectable_epsilon",
        "delta",
        "confidence",
        "canaries",
    } <= set(verdict)
    fields = {f.name for f in dataclasses.fields(OneRunAudit)}
    assert all(set(b) == fields for b in result["bounds"].values())


def test_delta_zero_runs_steinke_and_refuses_fdp_gaussian_naming_delta(files, capsys) -> None:
    """--delta 0 used to crash (the power statement's Gaussian μ needs δ > 0)."""
    s, inc, scores, included = files
    argv = ["one-run-bound", "--scores", str(s), "--included", str(inc), "--delta", "0"]
    assert main([*argv, "--claimed-epsilon", "40"]) == 0
    out = capsys.readouterr().out
    assert f"ε ≥ {audit_one_run(scores, included, delta=0.0).epsilon_lower:.3g}" in out
    assert "no power statement at δ = 0" in out and "fdp_gaussian left out" in out
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--analysis", "fdp_gaussian"])
    assert exc.value.code == 2 and "argument --delta" in capsys.readouterr().err


def test_help_documents_the_exit_codes(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["one-run-bound", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "1 VIOLATION PROVEN" in text and "2 bad input" in text


def test_old_spelling_is_a_hidden_alias(files, capsys) -> None:
    from dpaudit.cli import build_parser

    s, inc, _, _ = files
    assert main(["one-run", "--scores", str(s), "--included", str(inc), "--delta", "1e-5"]) == 0
    assert "ε" in capsys.readouterr().out
    help_lines = build_parser()[0].format_help().splitlines()
    listed = [line.split()[0] for line in help_lines if line.startswith("    ")]
    assert "one-run-bound" in listed and "one-run" not in listed
