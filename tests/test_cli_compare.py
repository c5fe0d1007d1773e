"""``dpaudit compare`` on payloads shaped like ``dvc exp show --json`` (DVC 3), without running DVC.

The README's experiments give the numbers: the baseline (ρβ grid up to 0.99, headline setting 0.9),
the README's ``rho_beta=[0.99]`` with ``reference_rho_beta=0.99`` (both identifiability audits move)
and ``rho_beta=[0.9]`` (no headline moves), the workspace holding the last one. The table must fit in
100 columns and 10 lines, name the changed parameters and print the numbers the summaries hold; the
end-to-end run of the same commands is in ``tests/test_readme_compare.py`` (slow).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dpaudit import cli
from dpaudit.cli import compare as compare_cmd
from dpaudit.cli.compare_table import (
    changed_audits,
    headline,
    number,
    render,
    short_keys,
    utility_of,
    wrap,
)

WIDTH, LINES = 100, 10

PARAMS = {
    "data": {"seed": 0, "datasets": ["adult", "digits"]},
    "identifiability": {
        "train": {"rho_beta": [0.52, 0.75, 0.9, 0.99], "reference_rho_beta": 0.9, "delta": None, "seed": 0},
        "bounds": {"confidence": 0.95},
    },
    "membership": {"train": {"seed": 0, "repeats": 5}},
}


def _audit(rdp: float, pld: float, lower: float, utility: float, level: float = 0.95) -> dict[str, Any]:
    return {
        "epsilon_upper": {"rdp": rdp, "pld": pld, "naive": 5 * rdp, "advanced": 9 * rdp},
        "epsilon_lower": lower,
        "epsilon_lower_level": level,
        "epsilon_lower_assumes": "gaussian",
        "rho_beta": 0.9,
        "utility": {"test accuracy": utility},
    }


MEMBERSHIP = {
    "epsilon_upper": {"naive": 322.97, "advanced": 8026.27, "rdp": 9.99995, "pld": 8.759345},
    "epsilon_lower": 0.0,
    "epsilon_lower_level": 0.95,
    "epsilon_lower_assumes": "one-run",
    "epsilon_star": 0.3646,
    "utility": {"AUROC": 0.8491453933542026},
}
BASELINE = {
    "adult-identifiability": _audit(2.1972187231361433, 1.9339835718357148, 1.4430643796622034, 0.7803982),
    "adult-membership": MEMBERSHIP,
    "digits-identifiability": _audit(2.1972234273199343, 1.8357071814377035, 1.154354629227046, 0.336542),
}
README_EXP = {
    "adult-identifiability": _audit(4.595119829487773, 4.09635, 2.89907, 0.7811),
    "adult-membership": MEMBERSHIP,
    "digits-identifiability": _audit(
        4.595119807888632, 3.9319464159086426, 3.50750007038032, 0.5512319999999999
    ),
}


def _with(tree: dict[str, Any], **dotted: Any) -> dict[str, Any]:
    """A deep copy of ``tree`` with ``a__b__c=value`` set (``__`` for the dots of a params key)."""
    out = copy.deepcopy(tree)
    for key, value in dotted.items():
        *parents, last = key.split("__")
        node = out
        for part in parents:
            node = node[part]
        node[last] = value
    return out


def _data(rev: str, timestamp: str | None, params: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "rev": rev,
        "timestamp": timestamp,
        "params": {"params.yaml": {"data": params}},
        "metrics": {"metrics/summary.json": {"data": summary}},
        "deps": {
            "stages/check.py": {"hash": "c708617f5b71e04cac66956846aa737e", "size": 1034, "nfiles": None}
        },
        "outs": {},
        "meta": {},
    }


def _payload(
    experiments: list[tuple[str, str, dict[str, Any], dict[str, Any]]],
    workspace: tuple[dict[str, Any], dict[str, Any]] | None = None,
    baseline: tuple[dict[str, Any], dict[str, Any]] = (PARAMS, BASELINE),
    branch: str = "main",
) -> list[dict[str, Any]]:
    """``dvc exp show --json`` as DVC 3.x prints it: the workspace, then the baseline commit with its
    experiments (``experiments: [{revs: [...], name, executor}]``), newest first."""
    base_rev = "375ecc92463a28849498ce80101e7622685fff11"
    exps = [
        {
            "revs": [
                {
                    "rev": f"{i + 1:07x}" + "0" * 33,
                    "name": name,
                    "data": _data(f"{i + 1:07x}" + "0" * 33, created, params, summary),
                    "error": None,
                    "experiments": None,
                }
            ],
            "name": name,
            "executor": None,
        }
        for i, (name, created, params, summary) in enumerate(experiments)
    ]
    exps.sort(key=lambda e: e["revs"][0]["data"]["timestamp"], reverse=True)
    ws_params, ws_summary = workspace or baseline
    return [
        {
            "rev": "workspace",
            "name": None,
            "data": _data("workspace", None, ws_params, ws_summary),
            "error": None,
            "experiments": None,
        },
        {
            "rev": base_rev,
            "name": branch,
            "data": _data(base_rev, "2026-11-28T03:08:18", *baseline),
            "error": None,
            "experiments": exps or None,
        },
    ]


README_PARAMS = _with(
    PARAMS, identifiability__train__rho_beta=[0.99], identifiability__train__reference_rho_beta=0.99
)
NARROW_PARAMS = _with(PARAMS, identifiability__train__rho_beta=[0.9])
TWO = _payload(
    [
        ("dedal-plum", "2026-11-28T04:18:38", README_PARAMS, README_EXP),
        ("sworn-dace", "2026-11-28T04:31:02", NARROW_PARAMS, BASELINE),
    ],
    workspace=(NARROW_PARAMS, BASELINE),
)


@pytest.fixture
def dvc_payload(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """Point the command at a given payload, in a directory that looks like a DVC project."""
    (tmp_path / ".dvc").mkdir()
    monkeypatch.chdir(tmp_path)

    def use(payload: list[dict[str, Any]]) -> Path:
        monkeypatch.setattr(compare_cmd, "exp_show", lambda root: copy.deepcopy(payload))
        return tmp_path

    return use


def _text(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert cli.main(["compare", *argv]) == 0
    return capsys.readouterr().out.rstrip("\n").splitlines()


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert cli.main(["compare", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as info:
        cli.main(["compare", *argv])
    assert info.value.code == 2
    return capsys.readouterr().err


def _row(lines: list[str], name: str) -> list[str]:
    """The cells of the table line that starts with ``name``."""
    line = next(line for line in lines if line.startswith(name + " "))
    return line.split()


# ---------------------------------------------------------------------------------------- acceptance


def test_two_experiments_fit_100_columns_and_10_lines(dvc_payload: Any, capsys: Any) -> None:
    dvc_payload(TWO)
    lines = _text(capsys)
    assert len(lines) <= LINES and max(map(len, lines)) <= WIDTH, "\n".join(lines)
    # Baseline first, then the experiments oldest first; the workspace repeats the last: no row.
    names = [
        line.split()[0]
        for line in lines
        if line[:1].strip() and line.split()[0] in ("main", "dedal-plum", "sworn-dace", "workspace")
    ]
    assert names == ["main", "dedal-plum", "sworn-dace"]
    # Both identifiability audits moved and are shown; the membership audit did not and is not.
    assert "adult-identifiability" in lines[0] and "digits-identifiability" in lines[0]
    assert not any("adult-membership" in line for line in lines)
    text = "\n".join(lines)
    assert "rho_beta=[0.99]" in text and "reference_rho_beta=0.99" in text and "rho_beta=[0.9]" in text
    assert "identifiability.train" not in text  # dotted keys shortened to their last component
    # Numbers: ε proven, ε promised (PLD), proven / promised, utility; adult's group first.
    # bounds rounded outward: ε proven down, ε promised up (1.9339… shows 1.94), the rest to nearest
    base = ["(baseline)", "1.44", "1.94", "0.746", "0.780", "1.15", "1.84", "0.629", "0.337"]
    assert _row(lines, "main")[1:] == base
    exp = _row(lines, "dedal-plum")
    assert exp[-8:] == ["2.89", "4.10", "0.708", "0.781", "3.50", "3.94", "0.892", "0.551"]
    assert _row(lines, "sworn-dace")[-8:] == _row(lines, "main")[-8:]
    legend = lines[-1]
    assert "95%" in legend and "PLD" in legend and "test accuracy" in legend


def test_json_rows_hold_the_changed_parameters_and_every_headline(dvc_payload: Any, capsys: Any) -> None:
    dvc_payload(TWO)
    result = _json(capsys)
    assert result["audits"] == ["adult-identifiability", "digits-identifiability"]
    rows = result["experiments"]
    assert [(r["name"], r["kind"]) for r in rows] == [
        ("main", "baseline"),
        ("dedal-plum", "experiment"),
        ("sworn-dace", "experiment"),
    ]
    assert rows[0]["params"] == {
        "identifiability.train.rho_beta": [0.52, 0.75, 0.9, 0.99],
        "identifiability.train.reference_rho_beta": 0.9,
    }
    assert rows[1]["params"]["identifiability.train.reference_rho_beta"] == 0.99
    head = rows[1]["headlines"]["digits-identifiability"]
    assert head["epsilon_lower"] == pytest.approx(3.5075) and head["level"] == 0.95
    assert head["accountant"] == "pld" and head["epsilon_upper"] == pytest.approx(3.93195, rel=1e-5)
    assert head["ratio"] == pytest.approx(3.5075 / 3.93195, rel=1e-4)
    assert head["utility"] == pytest.approx(0.551232) and head["utility_measure"] == "test accuracy"
    assert head["assumes"] == "gaussian"


def test_the_workspace_gets_a_row_only_when_it_holds_something_new(dvc_payload: Any, capsys: Any) -> None:
    edited = _with(PARAMS, identifiability__bounds__confidence=0.99)
    dvc_payload(
        _payload([("dedal-plum", "2026-11-28T04:18:38", README_PARAMS, README_EXP)], (edited, BASELINE))
    )
    lines = _text(capsys)
    assert _row(lines, "workspace")[1] == "confidence=0.99"


def test_unfinished_experiments_are_left_out_with_a_note(dvc_payload: Any, capsys: Any) -> None:
    payload = copy.deepcopy(TWO)
    queued = copy.deepcopy(payload[1]["experiments"][0])
    queued["name"] = queued["revs"][0]["name"] = "queue-item"
    queued["executor"] = {"state": "queued", "name": "dvc-task", "local": None}
    payload[1]["experiments"].insert(0, queued)
    dvc_payload(payload)
    lines = _text(capsys)
    assert not any(line.startswith("queue-item") for line in lines)
    assert lines[-1].startswith("1 experiment(s) without metrics/summary.json left out")
    assert len(lines) <= LINES and max(map(len, lines)) <= WIDTH


# -------------------------------------------------------------------------------------- summaries


def test_flat_utility_with_its_measure_reads_like_the_nested_one() -> None:
    nested = BASELINE["adult-identifiability"]
    flat = {k: v for k, v in nested.items() if k != "utility"} | {
        "utility": 0.7804,
        "utility_measure": "test accuracy",
    }
    assert utility_of(nested) == ("test accuracy", pytest.approx(0.7803982))
    assert utility_of(flat) == ("test accuracy", 0.7804)
    assert number(headline(flat)["utility"]) == number(headline(nested)["utility"]) == "0.780"
    assert utility_of({"utility": 0.5}) == (None, 0.5)
    assert utility_of({}) == (None, None)


def test_a_flat_utility_without_measure_takes_it_from_the_results_table(tmp_path: Path) -> None:
    summary = {"a-x": {"epsilon_lower": 1.0, "utility": 0.5}}
    rows = [
        {
            "name": "main",
            "rev": "workspace",
            "kind": "baseline",
            "created": None,
            "params": {"p": 1},
            "summary": summary,
        },
        {
            "name": "e",
            "rev": "workspace",
            "kind": "experiment",
            "created": None,
            "params": {"p": 2},
            "summary": {},
        },
    ]
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "a-x.csv").write_text(
        "group,quantity,value,low,high,level,assumes,estimator,kind,counted\n"
        ",utility,0.5,,,,none,balanced accuracy,utility,False\n"
    )
    result = compare_cmd.compare(rows, None, tmp_path)
    assert result["experiments"][0]["headlines"]["a-x"]["utility_measure"] == "balanced accuracy"
    assert "utility: balanced accuracy" in render(result)[-1]


def test_promised_prefers_pld_then_rdp_and_ratio_is_proven_over_promised() -> None:
    assert headline({"epsilon_upper": {"rdp": 2.0, "pld": 1.9}, "epsilon_lower": 0.95})["ratio"] == 0.5
    only_rdp = headline({"epsilon_upper": {"naive": 1.0, "rdp": 2.0}, "epsilon_lower": 1.0})
    assert (only_rdp["accountant"], only_rdp["epsilon_upper"], only_rdp["ratio"]) == ("rdp", 2.0, 0.5)
    other = headline({"epsilon_upper": {"naive": 3.0, "advanced": 4.0}})
    assert (other["accountant"], other["ratio"]) == ("naive", None)
    assert headline({"epsilon_upper": {"pld": 1e308}, "epsilon_lower": 1.0})["ratio"] is None
    assert headline({"epsilon_lower": 0.0, "epsilon_lower_level": 0.0})["level"] is None  # "no bound"


def test_numbers_keep_three_significant_digits() -> None:
    values = [0.78, 2.9, 1435.0, 0.0004464, 0.0, 14.634, None, 1e308]
    assert [number(v) for v in values] == ["0.780", "2.90", "1435", "0.000446", "0", "14.6", "–", "∞"]


def test_changed_audits_compare_what_is_shown() -> None:
    moved = copy.deepcopy(BASELINE)
    moved["adult-membership"]["epsilon_lower"] = 1e-9  # shows as 1.00e-09: a change
    moved["adult-identifiability"]["epsilon_lower"] += 1e-9  # shows the same: no change
    assert changed_audits([BASELINE, BASELINE]) == []
    assert changed_audits([BASELINE, moved]) == ["adult-membership"]
    assert changed_audits([BASELINE, {}]) == list(BASELINE)


# ----------------------------------------------------------------------------------------- layout


def test_a_level_that_differs_goes_into_its_cells(dvc_payload: Any, capsys: Any) -> None:
    strict = copy.deepcopy(BASELINE)
    for audit in ("adult-identifiability", "digits-identifiability"):
        strict[audit] |= {"epsilon_lower_level": 0.99, "epsilon_lower": strict[audit]["epsilon_lower"] * 0.9}
    params = _with(PARAMS, identifiability__bounds__confidence=0.99)
    dvc_payload(_payload([("tepid-ziti", "2026-11-28T05:00:00", params, strict)]))
    lines = _text(capsys)
    assert len(lines) <= LINES and max(map(len, lines)) <= WIDTH
    assert "1.44@95%" in _row(lines, "main") and "1.29@99%" in _row(lines, "tepid-ziti")
    assert "confidence=0.99" in _row(lines, "tepid-ziti")
    assert "level after @" in lines[-1]


def test_more_audits_than_fit_are_named_and_audit_picks(dvc_payload: Any, capsys: Any) -> None:
    base = {f"{ds}-{exp}": _audit(2.0, 1.9, 1.0, 0.8) for ds in ("adult", "digits") for exp in "abcd"}
    moved = {audit: _audit(4.0, 3.9, 2.0, 0.7) for audit in base}
    params = _with(PARAMS, data__seed=1)
    dvc_payload(_payload([("adept-abac", "2026-11-28T05:00:00", params, moved)], baseline=(PARAMS, base)))
    lines = _text(capsys)
    assert len(lines) <= LINES and max(map(len, lines)) <= WIDTH, "\n".join(lines)
    assert lines[-1].startswith("+6 more audits: adult-c, adult-d, digits-a") and "--audit NAME" in lines[-1]
    picked = _text(capsys, "--audit", "digits-d")
    assert "digits-d" in picked[0] and "adult-a" not in picked[0] and not picked[-1].startswith("+")
    result = _json(capsys)
    assert len(result["audits"]) == 8  # --json holds every audit that moved


def test_long_parameter_lists_wrap_to_two_lines_then_count() -> None:
    tokens = [f"key{i}=value{i}" for i in range(10)]
    lines = wrap(tokens, 30)
    assert len(lines) == 2 and all(len(line) <= 30 for line in lines)
    assert lines[-1].endswith("+6")
    assert wrap(["x" * 50], 20) == ["x" * 19 + "…"]


def test_many_changed_parameters_keep_the_limits(dvc_payload: Any, capsys: Any) -> None:
    params = _with(
        PARAMS,
        identifiability__train__rho_beta=[0.52, 0.75, 0.9, 0.99, 0.999],
        identifiability__train__delta=1e-6,
        identifiability__train__seed=7,
        membership__train__seed=7,
        membership__train__repeats=50,
        identifiability__bounds__confidence=0.99,
    )
    dvc_payload(_payload([("lucky-plum", "2026-11-28T05:00:00", params, README_EXP)]))
    lines = _text(capsys)
    assert len(lines) <= LINES and max(map(len, lines)) <= WIDTH, "\n".join(lines)
    text = "\n".join(lines)
    assert "identifiability.train.seed=7" in text or "+" in text  # two seeds kept apart, or counted


def test_short_keys_keep_keys_apart() -> None:
    keys = ["identifiability.train.seed", "membership.train.seed", "identifiability.train.rho_beta", "x"]
    assert short_keys(keys) == {
        "identifiability.train.seed": "identifiability.train.seed",
        "membership.train.seed": "membership.train.seed",
        "identifiability.train.rho_beta": "rho_beta",
        "x": "x",
    }


def test_no_headline_moved_says_so(dvc_payload: Any, capsys: Any) -> None:
    dvc_payload(_payload([("sworn-dace", "2026-11-28T04:31:02", NARROW_PARAMS, BASELINE)]))
    lines = _text(capsys)
    assert lines[-1] == "no headline differs between these experiments"
    assert _row(lines, "sworn-dace")[1] == "rho_beta=[0.9]"


# ----------------------------------------------------------------------------------------- errors


def test_outside_a_dvc_project_is_an_error(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.chdir(tmp_path)
    if any((folder / ".dvc").is_dir() for folder in (tmp_path, *tmp_path.parents)):
        pytest.skip("the temporary directory lies inside a DVC project")
    err = _error(capsys)
    assert "not inside a DVC project" in err and "--repo" in err


def test_a_repo_that_is_no_directory_is_an_error(tmp_path: Path, capsys: Any) -> None:
    err = _error(capsys, "--repo", str(tmp_path / "nowhere"))
    assert "nowhere is not a directory" in err


def test_missing_dvc_is_an_error(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    (tmp_path / ".dvc").mkdir()
    monkeypatch.chdir(tmp_path)
    find_spec = compare_cmd.importlib.util.find_spec
    monkeypatch.setattr(
        compare_cmd.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "dvc" else find_spec(name, *a),
    )
    err = _error(capsys)
    assert "DVC is not installed" in err and "pip install" in err


def test_no_experiments_is_an_error(dvc_payload: Any, capsys: Any) -> None:
    dvc_payload(_payload([]))
    err = _error(capsys)
    assert "no DVC experiments" in err and "dvc exp run -S" in err


def test_a_project_without_experiments_is_told_so_at_once(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """No experiment refs in git: the command says so without running `dvc exp show` (tens of
    seconds) and without blaming --repo, which was not given."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".dvc").mkdir()
    monkeypatch.chdir(tmp_path)

    def never(root: Path) -> list[dict[str, Any]]:
        raise AssertionError("dvc exp show ran although git holds no experiment")

    monkeypatch.setattr(compare_cmd, "exp_show", never)
    err = _error(capsys)
    assert "no DVC experiments" in err and "dvc exp run -S" in err and "--repo" not in err
    assert "usage:" not in err


def test_an_unknown_audit_names_the_known_ones(dvc_payload: Any, capsys: Any) -> None:
    dvc_payload(TWO)
    err = _error(capsys, "--audit", "adult-nothing")
    assert "adult-nothing" in err and "adult-membership" in err


def test_dvc_failing_is_reported_with_its_message(tmp_path: Path) -> None:
    (tmp_path / ".dvc").mkdir()  # a .dvc directory, but no DVC config and no git: DVC refuses
    with pytest.raises(cli.CliError, match="dvc exp show --json. failed"):
        compare_cmd.exp_show(tmp_path)


def test_the_command_is_registered_and_imports_no_dvc_or_pandas() -> None:
    assert "compare" in cli.COMMANDS
    code = "import sys, dpaudit.cli; print(sorted(m for m in ('dvc', 'pandas') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

