"""The README's headline demo: a hand-written DP-SGD step that leaves the output layer unclipped is
caught, and the README's output block is what the demo prints now (``docs/refresh_demo_output.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def _refresh() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_refresh_demo", REPO / "docs" / "refresh_demo_output.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_buggy_script_is_caught_and_the_readme_block_is_current() -> None:
    """Runs the demo as the README does (about 15 s): the verdict, and the README block's every line
    word for word (numbers masked: their digits depend on the machine's floating point)."""
    pytest.importorskip("tensorflow")
    refresh = _refresh()
    output = refresh.run_demo()
    lines = output.splitlines()
    assert lines[0] == "DOES NOT MATCH ITS DECLARED DP-SGD: clipped_sum_residual (95 %)"
    assert any("output/kernel" in line and "not each clipped to C" in line for line in lines)
    assert lines[-1].startswith("  next: ")
    documented = refresh.documented(README.read_text())
    assert refresh.shape(documented) == refresh.shape(
        output
    ), "README.md's demo block is stale: run python docs/refresh_demo_output.py"


def test_the_readme_shows_the_demo_in_a_refreshable_block() -> None:
    refresh = _refresh()
    text = README.read_text()
    block = refresh.documented(text)
    assert "python docs/examples/audit_my_dp_sgd.py" in text
    assert block.startswith("DOES NOT MATCH ITS DECLARED DP-SGD: clipped_sum_residual (95 %)\n")
    assert refresh.rewrite(text, block) == text  # rewriting with its own output changes nothing
    assert refresh.shape("ε 0.146, p = 8.3e-05") == ["ε #, p = #"]
