"""The README's headline demo: a hand-written DP-SGD step that leaves the output layer unclipped is caught."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "audit_my_dp_sgd.py"
README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_buggy_script_is_caught_by_the_residual_check(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), "--epochs", "4"])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "DOES NOT MATCH ITS DECLARED DP-SGD: clipped_sum_residual (95 %)"
    assert any("output/kernel" in line and "not each clipped to C" in line for line in out)


def test_the_readme_shows_the_demo_and_its_verdict() -> None:
    text = README.read_text()
    assert "python docs/examples/audit_my_dp_sgd.py" in text
    assert "DOES NOT MATCH ITS DECLARED DP-SGD: clipped_sum_residual (95 %)" in text
