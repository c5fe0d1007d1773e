"""The reduced validity suite (``benchmarks/validity.py --quick``): every headline estimator at its level."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "validity.py"


def load_suite():
    spec = importlib.util.spec_from_file_location("dpaudit_validity_suite", SUITE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def suite():
    return load_suite()


def test_exact_epsilon_of_the_reference_mechanisms(suite):
    import math

    # Randomised response at ε: ε(δ) = ln((p − δ)/(1 − p)) with p = e^ε/(1 + e^ε).
    p = math.e / (1 + math.e)
    assert suite.randomised_response(1.0).epsilon(0.0) == pytest.approx(1.0, abs=1e-8)
    expected = math.log((p - 0.1) / (1 - p))
    assert suite.randomised_response(1.0).epsilon(0.1) == pytest.approx(expected, abs=1e-8)
    assert suite.heavy_ties().epsilon(0.0) == pytest.approx(math.log(4.0), abs=1e-8)
    assert suite.laplace(1.0).epsilon(0.1) == pytest.approx(1.0 + 2 * math.log(0.9))


def test_reduced_suite_every_estimator_holds_its_level(suite):
    rows = suite.run(quick=True, seed=0)
    failed = [r for r in rows if not r["ok"]]
    assert not failed, suite.table(failed)
    names = {r["estimator"] for r in rows}
    expected = {"dpaudit scores headline", "one_run_lower_bound (k± = m/10)",
                "canaries per-model headline (3 types)", "every auditor estimator + one-run",
                "tpr_at_fpr 95 % interval", "canaries above population (evaluate)"}  # fmt: skip
    assert expected <= names
