"""`dpaudit` CLI: JSON of each command on a known case; bad input names the argument, exit status 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpaudit import cli
from dpaudit.bounds.epsilon_star import epsilon_star_empirical, epsilon_star_null, epsilon_star_parametric


def run_json(capsys, *argv: str) -> dict:
    assert cli.main([*argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # one JSON object on one line
    return json.loads(out)


def run_error(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as info:
        cli.main(list(argv))
    assert info.value.code == 2
    return capsys.readouterr().err


def test_acceptance_identifiability_console_script():
    script = Path(sys.executable).with_name("dpaudit")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "dpaudit.cli"]
    proc = subprocess.run(
        [*command, "identifiability", "--rho-beta", "0.9", "--delta", "0.001", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout)
    assert f"{result['epsilon']:.3f}" == "2.197"
    assert round(result["rho_alpha"], 2) == 0.23
    assert result["rho_beta"] == pytest.approx(0.9)


def test_identifiability_from_epsilon_and_rho_alpha(capsys):
    result = run_json(capsys, "identifiability", "--epsilon", "4.6", "--delta", "0.01")
    assert round(result["rho_alpha"], 2) == 0.54 and round(result["rho_beta"], 2) == 0.99
    back = run_json(capsys, "identifiability", "--rho-alpha", str(result["rho_alpha"]), "--delta", "0.01")
    assert back["epsilon"] == pytest.approx(4.6)


def test_identifiability_text_output(capsys):
    assert cli.main(["identifiability", "--rho-beta", "0.75", "--delta", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "epsilon: 1.09861" in out and "rho_alpha: 0.115648" in out


def test_accountant(capsys):
    result = run_json(
        capsys,
        "accountant",
        "--noise-multiplier",
        "1.1",
        "--sampling-rate",
        "0.01",
        "--steps",
        "1000",
        "--delta",
        "1e-5",
        "--accountant",
        "rdp",
    )
    assert result["epsilon"] == pytest.approx(1.712, abs=2e-3) and result["accountant"] == "rdp"
    every = run_json(
        capsys,
        "accountant",
        "--noise-multiplier",
        "2",
        "--sampling-rate",
        "1",
        "--steps",
        "30",
        "--delta",
        "1e-3",
        "--accountant",
        "all",
    )
    assert set(every["epsilon"]) == {"rdp", "pld", "naive", "advanced"}
    assert every["epsilon"]["pld"] <= every["epsilon"]["rdp"] <= every["epsilon"]["naive"]


def test_accountant_default_is_the_declarations_pld(capsys):
    """One default: the CLI's ε is the claimed ε an audit's declaration computes (PLD), not RDP's."""
    from dpaudit.training_audit.declaration import DeclaredDPSGD

    declared = DeclaredDPSGD(
        noise_multiplier=1.61, clip_norm=1.0, batch_size=64, dataset_size=1437, epochs=10, delta=1e-5
    )
    argv = ["--noise-multiplier", "1.61", "--sampling-rate", str(declared.sampling_rate)]
    result = run_json(capsys, "accountant", *argv, "--steps", str(declared.total_steps), "--delta", "1e-5")
    assert result["accountant"] == "pld"
    assert result["epsilon"] == pytest.approx(declared.claimed_epsilon, rel=1e-9)
    rdp = run_json(capsys, "accountant", *argv, "--steps", str(declared.total_steps), "--delta", "1e-5",
                   "--accountant", "rdp")["epsilon"]  # fmt: skip
    assert rdp > result["epsilon"] * 1.05  # the two differ: a silent RDP default would show
    with pytest.raises(SystemExit):
        cli.main(["accountant", "--help"])
    assert "default pld" in capsys.readouterr().out


def test_version_and_help_point_to_the_docs(capsys):
    from dpaudit import __version__

    with pytest.raises(SystemExit) as excinfo:
        cli.main(["--version"])
    assert excinfo.value.code == 0 and capsys.readouterr().out.strip() == f"dpaudit {__version__}"
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "docs/training-audit.md" in out and "import dpaudit" in out and "make run" in out


def test_calibrate(capsys):
    result = run_json(
        capsys,
        "calibrate",
        "--target-epsilon",
        "2.197",
        "--delta",
        "1e-3",
        "--sampling-rate",
        "1",
        "--steps",
        "30",
        "--accountant",
        "rdp",
    )
    assert result["epsilon"] <= 2.197 and result["epsilon"] == pytest.approx(2.197, rel=1e-3)
    assert result["noise_multiplier"] == pytest.approx(8.139, abs=2e-3)


def test_eps_lower(capsys):
    result = run_json(
        capsys,
        "eps-lower",
        "--fp",
        "0",
        "--fn",
        "0",
        "--negatives",
        "1000",
        "--positives",
        "1000",
        "--delta",
        "1e-5",
    )
    assert round(result["epsilon_lower"], 2) == 5.60
    assert result["confidence"] == 0.95 and result["limit_level"] == pytest.approx(0.975)
    assert result["epsilon_point"] is None  # infinite point estimate → JSON null
    assert {"fpr_upper", "fnr_upper"} <= set(result)


@pytest.fixture()
def loss_files(tmp_path):
    rng = np.random.default_rng(0)
    members, nonmembers = rng.gamma(2.0, 1.0, 300), rng.gamma(3.0, 1.0, 300)
    np.save(tmp_path / "m.npy", members)
    pd.DataFrame({"loss": nonmembers}).to_csv(tmp_path / "n.csv", index=False)
    np.savetxt(tmp_path / "n_noheader.csv", nonmembers)
    pd.DataFrame({"loss": nonmembers, "label": 1}).to_parquet(tmp_path / "n.parquet")
    return tmp_path, members, nonmembers


def test_epsilon_star(capsys, loss_files):
    path, members, nonmembers = loss_files
    expected = epsilon_star_parametric(members, nonmembers)
    for name in ("n.csv", "n_noheader.csv", "n.parquet"):
        result = run_json(
            capsys, "epsilon-star", "--members", str(path / "m.npy"), "--non-members", str(path / name)
        )
        assert result["method"] == "parametric"
        assert result["epsilon_star"] == pytest.approx(expected.epsilon_star)
        assert result["delta"] == pytest.approx(1 / (300 * math.log(300)))
    empirical = run_json(
        capsys,
        "epsilon-star",
        "--members",
        str(path / "m.npy"),
        "--non-members",
        str(path / "n.csv"),
        "--method",
        "empirical",
        "--delta",
        "0.001",
    )
    assert empirical["epsilon_star"] == pytest.approx(
        epsilon_star_empirical(members, nonmembers, 0.001).epsilon_star
    )
    # Every Epsilon* comes with its null level at the same n (label permutations of the same losses).
    null = epsilon_star_null(members, nonmembers, 0.001, "empirical", permutations=100, seed=0)
    assert empirical["null_mean"] == pytest.approx(null.mean())
    assert empirical["null_high"] == pytest.approx(np.sort(null)[95])  # the 96th of 100: ⌈0.95 · 101⌉
    assert empirical["above_null"] == (empirical["epsilon_star"] > empirical["null_high"])
    assert empirical["null_permutations"] == 100


def test_epsilon_star_text_shows_the_null_level(capsys, loss_files):
    path, _, _ = loss_files
    argv = ["epsilon-star", "--members", str(path / "m.npy"), "--non-members", str(path / "n.csv")]
    assert cli.main([*argv, "--permutations", "20"]) == 0  # ≥ 19 for the 95th percentile
    out = capsys.readouterr().out
    assert "null level at this n" in out and "20 label permutations" in out and "not a bound" in out


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["identifiability", "--rho-beta", "0.9", "--delta", "1.5"], "--delta"),
        (["identifiability", "--rho-beta", "0.3", "--delta", "0.001"], "--rho-beta"),
        (["identifiability", "--delta", "0.001"], "--epsilon"),
        (
            [
                "eps-lower",
                "--fp",
                "-1",
                "--fn",
                "0",
                "--negatives",
                "10",
                "--positives",
                "10",
                "--delta",
                "1e-5",
            ],
            "--fp",
        ),
        (
            [
                "eps-lower",
                "--fp",
                "11",
                "--fn",
                "0",
                "--negatives",
                "10",
                "--positives",
                "10",
                "--delta",
                "1e-5",
            ],
            "--fp",
        ),
        (
            ["eps-lower", "--fp", "1", "--fn", "0", "--negatives", "10", "--positives", "10", "--delta", "1"],
            "--delta",
        ),
        (
            [
                "eps-lower",
                "--fp",
                "1",
                "--fn",
                "0",
                "--negatives",
                "10",
                "--positives",
                "10",
                "--delta",
                "1e-5",
                "--confidence",
                "1",
            ],
            "--confidence",
        ),
        (
            [
                "accountant",
                "--noise-multiplier",
                "1",
                "--sampling-rate",
                "1.5",
                "--steps",
                "10",
                "--delta",
                "1e-5",
            ],
            "--sampling-rate",
        ),
        (
            [
                "accountant",
                "--noise-multiplier",
                "nan",
                "--sampling-rate",
                "0.5",
                "--steps",
                "10",
                "--delta",
                "1e-5",
            ],
            "--noise-multiplier",
        ),
        (
            ["calibrate", "--target-epsilon", "1", "--delta", "-1", "--sampling-rate", "1", "--steps", "10"],
            "--delta",
        ),
    ],
)
def test_bad_arguments(capsys, argv, argument):
    err = run_error(capsys, *argv)
    assert f"argument {argument}:" in err or f"arguments {argument} " in err, err


def test_bad_loss_files(capsys, tmp_path, loss_files):
    path, _, _ = loss_files
    good = str(path / "m.npy")
    err = run_error(capsys, "epsilon-star", "--members", str(tmp_path / "missing.npy"), "--non-members", good)
    assert "argument --members" in err and "does not exist" in err
    np.save(tmp_path / "nan.npy", np.array([0.1, np.nan, 0.3]))
    err = run_error(capsys, "epsilon-star", "--members", good, "--non-members", str(tmp_path / "nan.npy"))
    assert "argument --non-members" in err and "NaN" in err
    (tmp_path / "x.txt").write_text("1\n2\n")
    assert "argument --members" in run_error(
        capsys, "epsilon-star", "--members", str(tmp_path / "x.txt"), "--non-members", good
    )
    pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}).to_csv(tmp_path / "two.csv", index=False)
    err = run_error(capsys, "epsilon-star", "--members", str(tmp_path / "two.csv"), "--non-members", good)
    assert "argument --members" in err and "columns" in err


def test_commands_are_registered_in_one_place():
    assert list(cli.COMMANDS) == [
        "accountant",
        "calibrate",
        "identifiability",
        "eps-lower",
        "epsilon-star",
        "scores",
        "one-run-bound",
        "compare",
    ]
    with pytest.raises(ValueError, match="already registered"):
        cli.register(cli.COMMANDS["accountant"])


def test_import_is_light():
    code = "import sys, dpaudit.cli; print('tensorflow' in sys.modules, 'dp_accounting' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (
            [
                "accountant",
                "--noise-multiplier",
                "1e-300",
                "--sampling-rate",
                "1",
                "--steps",
                "100",
                "--delta",
                "1e-5",
                "--accountant",
                "naive",
            ],
            "--noise-multiplier",
        ),
        (["identifiability", "--rho-alpha", "0.9999999999999999", "--delta", "0.001"], "--rho-alpha"),
    ],
)
def test_extreme_values_exit_2_naming_the_argument(argv, argument, capsys):
    """Inputs the numerics cannot evaluate are usage errors naming the argument, not tracebacks."""
    with pytest.raises(SystemExit) as excinfo:
        cli.main(argv)
    assert excinfo.value.code == 2
    assert argument in capsys.readouterr().err


def test_acceptance_nasr_5_60_pure_dp_through_the_console_script():
    """Nasr et al.: 1000 trials per world, all correct, δ = 0, two-sided 95 % (joint 95 %) → 5.60."""
    script = Path(sys.executable).with_name("dpaudit")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "dpaudit.cli"]
    argv = ["eps-lower", "--fp", "0", "--fn", "0", "--negatives", "1000", "--positives", "1000"]
    proc = subprocess.run(
        [*command, *argv, "--delta", "0", "--json"], capture_output=True, text=True, check=True
    )
    result = json.loads(proc.stdout)
    assert f"{result['epsilon_lower']:.2f}" == "5.60"
    assert result["delta"] == 0.0 and result["confidence"] == 0.95


def test_issue_11_inputs_exit_2_naming_the_input(capsys, tmp_path, loss_files):
    path, _, _ = loss_files
    good = str(path / "m.npy")
    (tmp_path / "empty.npy").write_bytes(b"")
    err = run_error(capsys, "epsilon-star", "--members", str(tmp_path / "empty.npy"), "--non-members", good)
    assert "argument --members" in err and "empty" in err
    np.save(tmp_path / "two.npy", np.array([0.1, 0.2]))
    err = run_error(capsys, "epsilon-star", "--members", str(tmp_path / "two.npy"), "--non-members", good)
    assert "argument --members" in err and "at least 3 members" in err and "--delta" in err
    (tmp_path / "dir").mkdir()
    err = run_error(capsys, "epsilon-star", "--members", str(tmp_path / "dir"), "--non-members", good)
    assert "is a directory" in err and "does not exist" not in err
    huge = ["accountant", "--accountant", "pld", "--noise-multiplier", "1", "--sampling-rate", "0.01"]
    err = run_error(capsys, *huge, "--steps", str(10**12), "--delta", "1e-5")
    assert "argument --steps" in err and "limit" in err
    err = run_error(
        capsys,
        "calibrate",
        "--accountant",
        "pld",
        "--target-epsilon",
        "1",
        "--sampling-rate",
        "0.001",
        "--steps",
        str(10**9),
        "--delta",
        "1e-5",
    )
    assert "argument --steps" in err and "limit" in err


def test_values_near_float_max_are_handled(capsys, tmp_path):
    np.save(tmp_path / "a.npy", np.array([1e308, -1e308, 0.0, 2.0]))
    np.save(tmp_path / "b.npy", np.array([-1e308, 1e308, 5.0, 1.0]))
    a, b = str(tmp_path / "a.npy"), str(tmp_path / "b.npy")
    star = run_json(capsys, "epsilon-star", "--members", a, "--non-members", b, "--delta", "0.01")
    assert star["epsilon_star"] is not None and star["epsilon_star"] >= 0
    scores = run_json(capsys, "scores", "--in", a, "--out", b, "--delta", "0.01")
    assert all(math.isfinite(v) for v in scores["metrics"].values())


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    """`dpaudit … | head` closes the pipe before the output is written: the command still exits with
    its own status and prints no BrokenPipeError."""
    args = [sys.executable, "-m", "dpaudit.cli", "accountant", "--noise-multiplier", "1.1", "--delta", "1e-5"]
    args += ["--sampling-rate", "0.01", "--steps", "100", "--accountant", "all"]
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader is gone before the first line
    error = child.stderr.read().decode()
    assert child.wait(timeout=120) == 0, error
    assert "BrokenPipeError" not in error and "Traceback" not in error, error
