"""The "Audit your own data and model" walkthrough (``docs/own-data.md``), run as written in a temporary copy.

The page's fenced blocks run in order: a ``python`` block whose first line is ``# <file>.py`` is
written to that file (and run by the next ``bash`` block), a ``yaml`` block is merged into
``params.yaml``, a ``bash`` block runs with ``bash -e``. Only sizes change: the audits' training
settings are shrunk to seconds (``TINY``), the Keras model trains for fewer epochs, the default
audits of the built-in datasets are dropped and digits stays as a second dataset without audits, so
that "only that dataset's stages" can be checked. Then: the data change marks exactly
``download-custom@cancer`` stale, and ``dvc metrics diff`` reports changed metrics.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.test_dvc_workflow import BIN, REPO, _copy_tree, _env, _run

PAGE = REPO / "docs" / "own-data.md"
SECTION = "# Audit your own data and model"
TINY: dict[str, Any] = {
    "membership": {
        "train": {
            "repeats": 1,
            "dpsgd": {"sampling_rate": 0.5, "epochs": 2, "noise_multipliers": [1.0], "target_epsilons": []},
            "baselines": {"epochs": [2], "sampling_rate": 0.5},
            "xgboost": {"enabled": False},
        },
    },
    "target": {
        "train": {"shadows": 4, "epochs": 2, "sampling_rate": 0.5},
        "bounds": {"bootstrap": 20},
    },
}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def blocks() -> list[tuple[str, str]]:
    """``(language, code)`` of every fenced block of the walkthrough page, in order."""
    text = PAGE.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end > 0 else len(text)]
    return re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)


def test_the_section_has_the_walkthrough() -> None:
    kinds = [kind for kind, _ in blocks()]
    assert kinds.count("python") >= 2 and kinds.count("yaml") == 2 and kinds.count("bash") >= 4
    code = "".join(c for _, c in blocks())
    for command in ("dvc add data/custom/breast_cancer.csv", "dvc repro", "dvc status", "dvc metrics diff"):
        assert command in code


@pytest.mark.slow
def test_readme_walkthrough_from_dvc_add_to_a_report(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    work.mkdir()
    _copy_tree(work)
    _run(["git", "init", "-q"], work)
    if not (work / ".dvc" / "config").exists():
        _run([str(BIN / "dvc"), "init", "-q"], work)
    params_path = work / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    params["data"]["datasets"] = ["digits"]
    params["audits"] = {}
    params_path.write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True))
    env = _env(work)
    env["PATH"] = f"{BIN}:{env['PATH']}"
    pending: dict[str, str] = {}
    for kind, code in blocks():
        if kind == "python":
            first = code.splitlines()[0]
            name = first.removeprefix("# ").strip()
            assert name.endswith(".py"), first
            pending[name] = code.replace("epochs=300", "epochs=40")
            (work / name).write_text(pending[name])
        elif kind == "yaml":
            params = _merge(yaml.safe_load(params_path.read_text()), yaml.safe_load(code))
            params = _merge(params, TINY)
            params_path.write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True))
        elif kind == "bash":
            if "dvc status" in code:
                _check_status_then_rest(code, work, env)
                continue
            result = subprocess.run(["bash", "-e", "-c", code], cwd=work, env=env, capture_output=True,
                                    text=True, timeout=600)
            assert result.returncode == 0, f"{code}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    report = (work / "reports" / "index.html").read_text()
    keras_record = yaml.safe_load((work / "models" / "cancer.keras.dvc").read_text())
    assert keras_record["outs"][0]["md5"] in report, "the report shows the model file's DVC digest"
    metrics = json.loads((work / "results" / "cancer_model-target.json").read_text())
    assert 0.0 <= metrics["attack=lira_offline"]["auroc"] <= 1.0
    assert "epsilon_star_parametric" in metrics["attack=logit_loss"]
    provenance = json.loads((work / "data" / "prepared" / "cancer.provenance.json").read_text())
    assert provenance["file"] == "data/custom/breast_cancer.csv" and provenance["fitted_on"] == "pool"
    shutil.rmtree(work / ".dvc" / "cache", ignore_errors=True)


def _check_status_then_rest(code: str, work: Path, env: dict[str, str]) -> None:
    """Run the data-change block, checking ``dvc status`` and ``dvc metrics diff`` on the way."""
    before, after = code.split("dvc status", 1)
    result = subprocess.run(["bash", "-e", "-c", before], cwd=work, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    status = json.loads(_run([str(BIN / "dvc"), "status", "--json"], work))
    assert set(status) == {"download-custom@cancer"}, status
    _run([str(BIN / "dvc"), "repro"], work, timeout=600)
    assert "dvc metrics diff" in after
    diff = json.loads(_run([str(BIN / "dvc"), "metrics", "diff", "--json"], work))
    assert diff.get("metrics/summary.json"), diff
