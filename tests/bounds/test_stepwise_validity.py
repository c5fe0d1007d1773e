"""The per-step family bound keeps its level when both worlds share an unknown baseline
(``benchmarks/validity_stepwise.py --quick``: offsets of 0, ½, 1 and 2 standard errors)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "validity_stepwise.py"


def test_reduced_stepwise_suite_holds_its_level_at_every_offset() -> None:
    spec = importlib.util.spec_from_file_location("dpaudit_validity_stepwise", SUITE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    rows = module.run(quick=True, seed=0)
    assert [r for r in rows if not r["ok"]] == [], module.table(rows)
    assert {r["setting"].split(" s.e.")[0] for r in rows} == {
        f"baseline offset {o:g}" for o in (0.0, 0.5, 1.0, 2.0)
    }
    assert all(r["stated_level"] == 0.95 and r["repeats"] >= 300 for r in rows)
