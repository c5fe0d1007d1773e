"""The bug catalogue (``benchmarks/bug_catalogue``): its entries are well formed, its recorded true ε match
their formulas, and a short audit catches one bug while passing one control (the benchmark's idea in
about half a minute; ``benchmarks/bench_bugs.py`` runs every entry over many seeds)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("tensorflow_privacy")
pytest.importorskip("sklearn")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def catalogue() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bug_catalogue

        yield bug_catalogue
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_entries_are_well_formed_and_cover_every_class(catalogue) -> None:
    entries = [catalogue.load(name) for name in catalogue.ENTRIES]
    classes = [e.BUG_CLASS for e in entries]
    assert classes.count("control") >= 3
    assert len(entries) - classes.count("control") >= 10
    assert set(classes) == set(catalogue.CLASSES)
    for e in entries:
        assert isinstance(e.TRUE_EPSILON, float) and e.TRUE_EPSILON > 0, e.NAME
        assert (e.TRUE_EPSILON == 2.0) == (e.BUG_CLASS == "control"), e.NAME
        assert e.DESCRIPTION and "\n" not in e.DESCRIPTION, e.NAME
        assert callable(e.run) and callable(e.true_epsilon), e.NAME
    with pytest.raises(ValueError, match="unknown entry"):
        catalogue.load("no_such_bug")


# The entries whose true ε takes under a second to recompute (the others take seconds to minutes).
CHEAP = (
    "control_tfp_sgd",
    "clip_one_microbatch",
    "clip_per_variable",
    "loader_extra_epoch",
    "loader_repeat_before_batch",
    "loader_oversample_subset",
    "sampling_fixed_batches",
    "sampling_same_poisson_mask",
    "sampling_double_rate",
    "clip_batch_gradient",
    "noise_kernels_only",
)


@pytest.mark.parametrize("name", CHEAP)
def test_recorded_true_epsilon_matches_its_formula(catalogue, name: str) -> None:
    entry = catalogue.load(name)
    assert math.isclose(entry.true_epsilon(), entry.TRUE_EPSILON, rel_tol=1e-6)


def test_short_audit_catches_the_bug_and_passes_the_control(catalogue) -> None:
    """Two epochs (46 steps) and 100 canaries: noise σ/10 is caught by the canaries' signal-to-noise,
    TF Privacy's correct optimizer is not flagged."""
    control = catalogue.load("control_tfp_sgd").run(0, epochs=2, canaries=100)
    assert not control.caught, str(control)
    bug = catalogue.load("noise_div10").run(0, epochs=2, canaries=100)
    assert bug.caught, str(bug)
    assert "signal_to_noise_high" in {c.name for c in bug.mismatches}


def test_the_nested_control_builds_after_a_functional_model_in_the_same_process(catalogue) -> None:
    """Keras rebases a Model subclass onto Functional once it was built functionally; a benchmark
    worker that ran another entry first must still build the nested control (it crashed there)."""
    common = catalogue.load("control_poisson_step").common
    common.dp_model(0, 1.0)
    model = catalogue.load("control_nested_model").nested_model(0, 1.0)
    assert model.net.layers[0].name and len(model.trainable_variables) == 6
