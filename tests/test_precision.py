"""Versioned numbers: significant digits, outward rounding of bounds, and the kernel-noise case."""

from __future__ import annotations

import math

import pytest

from dpaudit.precision import exact, measured, significant, versioned


@pytest.mark.parametrize(
    ("value", "digits", "direction", "expected"),
    [
        (1.4430643796622034, 3, "down", 1.44),
        (1.4499999, 3, "up", 1.45),
        (1.4466, 3, "nearest", 1.45),
        (1.4466, 3, "down", 1.44),
        (0.0004464285714285714, 3, "nearest", 0.000446),
        (1435.0, 3, "nearest", 1440.0),
        (1435.0, 3, "down", 1430.0),
        (-0.0123456, 3, "down", -0.0124),
        (0.7, 3, "down", 0.7),  # on the grid: never moves, even through binary floats
        (0.95, 3, "up", 0.95),
        (3.999998211445642, 6, "up", 4.0),
        (4.324002163939619, 6, "up", 4.32401),
    ],
)
def test_significant_digits_in_each_direction(value, digits, direction, expected):
    assert significant(value, digits, direction) == expected


def test_infinities_nan_and_zero_pass_through_and_bad_arguments_are_refused():
    assert significant(math.inf, 3) == math.inf and significant(-math.inf, 3, "down") == -math.inf
    assert math.isnan(significant(math.nan, 3)) and significant(0.0, 3, "up") == 0.0
    with pytest.raises(ValueError, match="digits"):
        significant(1.0, 0)
    with pytest.raises(ValueError, match="direction"):
        significant(1.0, 3, "sideways")  # type: ignore[arg-type]


def test_the_last_float_digits_of_two_kernel_libraries_write_the_same_number():
    # The same accountant ε and Epsilon* from oneDNN and Eigen runs of one pipeline on one machine.
    assert exact(4.324002163967506, "up") == exact(4.324002163939619, "up")
    assert exact(3.9999982113978327, "up") == exact(3.999998211445642, "up")
    assert measured(0.3646647265720618) == measured(0.3646647414846055)
    assert measured(0.8491453933542026) == measured(0.8491453933542024)


def test_a_tree_rounds_bounds_outward_and_accountants_at_exact_precision():
    tree = {
        "audit": {
            "epsilon_upper": {"rdp": 4.324002163939619, "pld": 1.814822098846292},
            "epsilon_lower": 1.4466,
            "epsilon_lower_level": 0.9833333333333333,
            "epsilon_lower_assumes": "gaussian",
            "tpr": {"value": 0.36123, "low": 0.33644, "high": 0.38407},
            "ceiling_upper": 0.0141,
            "counts": [1, 2],
            "ok": True,
        }
    }
    out = versioned(tree)["audit"]
    assert out["epsilon_upper"] == {"rdp": 4.32401, "pld": 1.81483}
    assert out["epsilon_lower"] == 1.44  # down: still a lower bound
    assert out["epsilon_lower_level"] == 0.9833333333333333  # a level is exact
    assert out["epsilon_lower_assumes"] == "gaussian"
    assert out["tpr"] == {"value": 0.361, "low": 0.336, "high": 0.385}
    assert out["ceiling_upper"] == 0.0141 and out["counts"] == [1, 2] and out["ok"] is True


def test_the_provenance_names_the_kernel_library(tmp_path):
    from dpaudit.report.provenance import kernel_library

    avx512, plain = tmp_path / "avx512", tmp_path / "plain"
    avx512.write_text("flags\t\t: fpu sse2 avx2 avx512f avx512dq\n")
    plain.write_text("flags\t\t: fpu sse2 avx2\n")
    assert kernel_library({}, avx512).startswith("oneDNN")
    assert kernel_library({}, plain).startswith("Eigen")
    assert kernel_library({"TF_ENABLE_ONEDNN_OPTS": "0"}, avx512) == "Eigen (TF_ENABLE_ONEDNN_OPTS=0)"
    assert kernel_library({"TF_ENABLE_ONEDNN_OPTS": "1"}, plain) == "oneDNN (TF_ENABLE_ONEDNN_OPTS=1)"
