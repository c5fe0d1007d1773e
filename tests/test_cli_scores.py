"""``dpaudit scores``: the scores auditor from files, its headline, warnings and refusals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from tests.test_cli import run_error, run_json

from dpaudit import cli


@pytest.fixture()
def score_files(tmp_path):
    rng = np.random.default_rng(0)
    in_scores, out_scores = rng.normal(1.2, 1.0, 1000), rng.normal(0.0, 1.0, 1000)
    np.save(tmp_path / "in.npy", in_scores)
    np.save(tmp_path / "out.npy", out_scores)
    pd.DataFrame({"score": out_scores, "other": 0.0}).to_csv(tmp_path / "out.csv", index=False)
    pd.DataFrame({"s": in_scores}).to_parquet(tmp_path / "in.parquet")
    return tmp_path, in_scores, out_scores


def test_scores(capsys, score_files):
    from dpaudit.bounds.auditor import audit_scores

    path, in_scores, out_scores = score_files
    result = run_json(
        capsys, "scores", "--in", str(path / "in.parquet"), "--out", str(path / "out.csv"), "--delta", "1e-3"
    )
    expected = audit_scores(in_scores, out_scores, delta=1e-3)
    for name, bound in expected.lower_bounds.items():
        assert result["lower_bounds"][name]["epsilon"] == pytest.approx(bound.epsilon)
        assert result["lower_bounds"][name]["valid"] is bound.valid
    assert result["lower_bounds"]["sweep_naive"]["valid"] is False
    assert result["lower_bounds"]["gdp"]["counted"] is False
    assert result["metrics"]["epsilon_lower_gdp"] == pytest.approx(expected.lower_bounds["gdp"].epsilon)
    assert all(isinstance(v, float) and math.isfinite(v) for v in result["metrics"].values())
    head = result["headline"]
    assert head["confidence"] == 0.95 and head["counted"] == ["sweep_bonferroni", "sweep_split"]
    assert head["epsilon_lower"] == pytest.approx(expected.headline.epsilon)
    sub = run_json(
        capsys,
        "scores",
        "--in",
        str(path / "in.npy"),
        "--out",
        str(path / "out.npy"),
        "--delta",
        "1e-3",
        "--confidence",
        "0.9",
        "--assume",
        "subsampled",
        "--sampling-rate",
        "1",
        "--steps",
        "4",
    )
    # q = 1: the family is the Gaussian mechanism, so at equal levels its bound equals the GDP bound.
    family = sub["lower_bounds"]["subsampled_gaussian"]
    assert family["counted"] is True and family["confidence"] == pytest.approx(1 - 0.1 / 3)
    assert sub["lower_bounds"]["gdp"]["confidence"] == 0.9 and sub["headline"]["confidence"] == 0.9
    same_level = audit_scores(in_scores, out_scores, delta=1e-3, confidence=1 - 0.1 / 3)
    assert family["epsilon"] == pytest.approx(same_level.lower_bounds["gdp"].epsilon, rel=1e-6)
    assert (
        cli.main(["scores", "--in", str(path / "in.npy"), "--out", str(path / "out.npy"), "--delta", "0"])
        == 0
    )
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("PROVEN: ε ≥") and "95 % confidence" in text[0]
    assert len(text) <= 25 and not any("warning" in line for line in text)
    assert any(line.split()[0] == "gdp" and "NOT counted" in line for line in text if line.strip())
    # An uncounted number is not printed as a claim "ε ≥ …", and no phrase says "assumes" twice.
    gdp = next(line for line in text if line.strip().startswith("gdp"))
    assert "ε ≥" not in gdp and "assumes a Gaussian" in gdp
    assert not any("assumes assumes" in line for line in text)
    args = ["scores", "--in", str(path / "in.npy"), "--out", str(path / "out.npy"), "--delta", "1e-3"]
    assert cli.main([*args, "--assume", "gaussian"]) == 0
    text = capsys.readouterr().out.splitlines()
    gdp = next(line for line in text if line.strip().startswith("gdp"))
    assert "counted" in gdp and "; assumes a Gaussian" in gdp and "assumes assumes" not in gdp


def test_scores_on_losses_warn_about_the_sign(capsys, score_files):
    path, in_scores, out_scores = score_files
    np.save(path / "member_losses.npy", -in_scores)
    np.save(path / "nonmember_losses.npy", -out_scores)
    args = ["scores", "--in", str(path / "member_losses.npy"), "--out", str(path / "nonmember_losses.npy")]
    assert cli.main([*args, "--delta", "1e-3"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("NOTHING PROVEN") and "--lower-is-member" in text[1]
    flipped = run_json(capsys, *args, "--delta", "1e-3", "--lower-is-member")
    plain = run_json(capsys, "scores", "--in", str(path / "in.npy"), "--out", str(path / "out.npy"),
                     "--delta", "1e-3")  # fmt: skip
    assert flipped["warnings"] == [] and flipped["headline"] == plain["headline"]


def test_scores_randomised_response_never_headlines_the_gaussian_fit(capsys, tmp_path):
    # Scores of randomised response at exactly ε = 1: GDP reads ∞ at δ = 0, the headline must not.
    rng = np.random.default_rng(5)
    p = math.e / (1 + math.e)
    np.save(tmp_path / "in.npy", (rng.random(1000) < p).astype(float))
    np.save(tmp_path / "out.npy", (rng.random(1000) >= p).astype(float))
    result = run_json(capsys, "scores", "--in", str(tmp_path / "in.npy"), "--out", str(tmp_path / "out.npy"),
                      "--delta", "0")  # fmt: skip
    assert result["lower_bounds"]["gdp"]["epsilon"] is None  # ∞, not counted
    assert 0.0 < result["headline"]["epsilon_lower"] <= 1.0
    assert result["headline"]["estimator"].startswith("sweep_")


def test_bad_score_files(capsys, tmp_path, score_files):
    path, _, _ = score_files
    good = str(path / "out.npy")
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / "header.csv").write_text("score\n")
    np.save(tmp_path / "nan.npy", np.array([0.1, np.nan, 0.3]))
    np.save(tmp_path / "square.npy", np.ones((3, 3)))
    pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}).to_csv(tmp_path / "two.csv", index=False)
    (tmp_path / "folder.npy").mkdir()
    cases = [
        ("empty.npy", [], "is empty (0 bytes)"),
        ("header.csv", [], "holds no values"),
        ("nan.npy", [], "NaN"),
        ("square.npy", [], "1-D array, got shape (3, 3)"),
        ("two.csv", [], "2 columns"),
        ("two.csv", ["--column", "score"], "no column 'score'"),
        ("folder.npy", [], "is a directory, not a file"),
        ("missing.npy", [], "does not exist"),
    ]
    for name, extra, message in cases:
        err = run_error(
            capsys, "scores", "--in", str(tmp_path / name), "--out", good, "--delta", "1e-3", *extra
        )
        assert "argument --in:" in err and name in err and message in err, err
    err = run_error(
        capsys, "scores", "--in", good, "--out", good, "--delta", "1e-3", "--assume", "subsampled"
    )
    assert "argument --sampling-rate" in err
    err = run_error(capsys, "scores", "--in", good, "--out", good, "--delta", "1e-3", "--q", "0.1")
    assert "argument --assume" in err and "--sampling-rate and --steps" in err
    err = run_error(capsys, "scores", "--in", good, "--out", good, "--delta", "1e-3", "--higher-is-member",
                    "--lower-is-member")  # fmt: skip
    assert "not allowed with" in err
