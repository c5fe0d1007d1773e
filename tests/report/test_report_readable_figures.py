"""Figures a reader can read: the region of privacy has an ε axis by every panel, and a line plot with
a single x value (one target ε at default settings) becomes a dot chart that keeps bounds and
estimates apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from dpaudit.report.figures import (
    REGION_BAR_LABEL,
    column_role,
    draw_figure,
    load_figure_data,
    single_x,
)
from dpaudit.report.region import (
    REGION_TOP_AXIS_ROWS,
    REGION_TWO_COLUMNS_ROWS,
    region_columns,
    region_of_privacy_figure,
)
from dpaudit.results import FigureSpec, SummaryRow

THREAT_MODELS = ("A: API access", "E: gradient canary", "F: malicious dataset")


def _settings(audit: str, n: int) -> list[tuple[str, SummaryRow]]:
    """``n`` settings of ``audit`` with a lower bound, three accountants and an Epsilon*."""
    return [
        (audit, SummaryRow(f"z={k}", {"rdp": 2.0 + k, "pld": 1.8 + k, "naive": 20.0 + k}, 0.1 * (k + 1),
                           "split", {"epsilon_star": 0.5}))  # fmt: skip
        for k in range(n)
    ]


def _panels(fig: Figure) -> list[Axes]:
    return [ax for ax in fig.axes if ax.get_visible()]


def _labels_shown(ax: Axes, side: str) -> bool:
    """Whether ``ax`` prints ε tick labels at the ``bottom`` or ``top``."""
    ax.figure.canvas.draw()
    ticks = [t for t in ax.xaxis.get_major_ticks() if ax.get_xlim()[0] <= t.get_loc() <= ax.get_xlim()[1]]
    label = (lambda t: t.label1) if side == "bottom" else (lambda t: t.label2)
    return len(ticks) >= 3 and all(label(t).get_visible() and label(t).get_text() for t in ticks)


def test_region_of_privacy_draws_one_panel_per_audit_each_with_its_own_eps_axis():
    rows = _settings("tall-audit", REGION_TOP_AXIS_ROWS + 4) + _settings("short-audit", 2)
    fig = region_of_privacy_figure(rows)
    assert fig is not None
    tall, short = _panels(fig)
    assert [tall.get_title(loc="left"), short.get_title(loc="left")] == ["tall-audit", "short-audit"]
    assert [t.get_text() for t in short.get_yticklabels()] == ["z=0", "z=1"]  # the audit is the title
    assert tall.get_xlim() == short.get_xlim() and tall.get_xscale() == short.get_xscale() == "log"
    # Every panel prints its ε tick labels below; a tall one above as well, a short one not.
    assert _labels_shown(tall, "bottom") and _labels_shown(short, "bottom")
    assert _labels_shown(tall, "top") and not _labels_shown(short, "top")
    # Light vertical grid lines run through every row.
    for ax in (tall, short):
        assert any(line.get_visible() for line in ax.get_xgridlines())
        assert not any(line.get_visible() for line in ax.get_ygridlines())


def test_region_of_privacy_values_stay_on_their_rows_and_panels():
    rows = _settings("a", 3) + _settings("b", 1)
    fig = region_of_privacy_figure(rows)
    a, b = _panels(fig)
    lower = [line for line in a.get_lines() if line.get_label().startswith("ε lower (valid")]
    np.testing.assert_allclose(sorted(float(line.get_xdata()[0]) for line in lower), [0.1, 0.2, 0.3])
    assert sorted(float(line.get_ydata()[0]) for line in lower) == [0, 1, 2]
    (only,) = (line for line in b.get_lines() if line.get_label() == "ε upper (pld)")
    assert float(only.get_xdata()[0]) == pytest.approx(1.8) and float(only.get_ydata()[0]) == 0


def test_many_rows_go_in_two_columns_of_about_equal_height():
    counts = [("adult-identifiability", 16), ("adult-instantiation", 1), ("adult-membership", 16),
              ("adult-onerun", 1), ("digits-canaries", 9), ("digits-identifiability", 16),
              ("digits-instantiation", 1), ("digits-membership", 16)]  # fmt: skip
    left, right = region_columns(counts)
    assert left == [name for name, _ in counts[:4]] and right == [name for name, _ in counts[4:]]
    assert region_columns([("a", REGION_TWO_COLUMNS_ROWS // 2), ("b", REGION_TWO_COLUMNS_ROWS // 2)]) == [
        ["a", "b"]
    ]
    assert region_columns([("a", REGION_TWO_COLUMNS_ROWS + 5)]) == [["a"]]  # one audit: one column
    fig = region_of_privacy_figure(_settings("a", 20) + _settings("b", 6) + _settings("c", 20))
    panels = _panels(fig)
    assert [p.get_title(loc="left") for p in panels] == ["a", "b", "c"]
    fig.canvas.draw()
    xs = sorted({round(p.get_window_extent().x0, -1) for p in panels})
    assert len(xs) == 2  # two columns of panels
    assert all(_labels_shown(p, "bottom") for p in panels)


def _one_target_csv(root: Path, targets: tuple[float, ...] = (2.0,)) -> FigureSpec:
    """An instantiation-like figure: per threat model, bounds, an estimate and a cap at each target ε."""
    path = root / "epsilon.csv"
    lines = ["threat_model,epsilon_target,epsilon_lower_sweep,epsilon_lower_family,epsilon_estimate_naive,"
             "epsilon_pld,cp_cap"]  # fmt: skip
    for target in targets:
        for k, tm in enumerate(THREAT_MODELS):
            lines.append(f"{tm},{target},{0.1 * k},{0.6 * k * target / 2},{0.7},{0.9 * target},3.3")
    path.write_text("\n".join(lines) + "\n")
    return FigureSpec(
        "eps", "ε lower bound against the target ε", "line", str(path), "epsilon_target",
        ["epsilon_lower_sweep", "epsilon_lower_family", "epsilon_estimate_naive", "epsilon_pld", "cp_cap"],
        "target ε (RDP calibration)", "ε", facet="threat_model", diagonal=True,
    )  # fmt: skip


def test_column_roles_tell_bounds_from_estimates():
    assert column_role("epsilon_lower_sweep") == column_role("eps_lb") == "lower"
    assert column_role("epsilon_pld") == column_role("epsilon_upper_rdp") == column_role("eps_ub") == "upper"
    for estimate in ("epsilon_estimate_naive", "epsilon_star", "epsilon_prime", "eps_lb_estimate"):
        assert column_role(estimate) == "estimate", estimate
    assert column_role("epsilon_lower_ratio") == column_role("cp_cap") == "other"


def test_one_target_eps_draws_a_dot_chart_of_bounds_and_estimates(tmp_path):
    spec = _one_target_csv(tmp_path)
    assert single_x(load_figure_data(spec, tmp_path), spec) == 2.0
    fig = draw_figure(spec, tmp_path, level=0.95)
    (ax,) = fig.axes  # one chart, not one panel per threat model
    assert [t.get_text() for t in ax.get_yticklabels()] == list(THREAT_MODELS)
    assert ax.get_xlabel() == "ε" and "target ε (RDP calibration) of this run: 2" in fig.get_suptitle()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "ε lower bound (sweep): proven lower bound, joint 95 %" in labels
    assert "ε estimate (naive): estimate, not a bound" in labels
    assert "ε (PLD): upper bound (accountant)" in labels
    assert "target ε (RDP calibration) = 2" in labels and REGION_BAR_LABEL in labels
    # An estimate is never called a bound; a bound never an estimate.
    assert not [t for t in labels if "estimate" in t and "not a bound" not in t]
    # The target ε is a vertical line at 2; every threat model's values sit on its own row.
    (target,) = (line for line in ax.get_lines() if line.get_label().startswith("target ε"))
    assert list(target.get_xdata()) == [2, 2]
    family = [c.lines[0].get_data() for c in ax.containers if c.get_label().startswith("ε lower bound (fam")]
    np.testing.assert_allclose([float(x[0]) for x, _ in family], [0.0, 0.6, 1.2])
    assert [round(float(y[0])) for _, y in family] == [0, 1, 2]
    # The bar of each row runs from its largest lower bound to its smallest upper bound (ε_PLD 1.8).
    bars = [line for line in ax.get_lines() if line.get_label() == REGION_BAR_LABEL]
    spans = sorted(tuple(np.round(line.get_xdata(), 6)) for line in bars)
    assert spans == [(0.0, 1.8), (0.6, 1.8), (1.2, 1.8)]
    assert sorted(t.get_text() for t in ax.texts) == ["0.6", "1.2"]  # the best proven value, where > 0


def test_two_target_eps_keep_the_line_chart(tmp_path):
    spec = _one_target_csv(tmp_path, targets=(1.0, 4.0))
    assert single_x(load_figure_data(spec, tmp_path), spec) is None
    fig = draw_figure(spec, tmp_path)
    panels = _panels(fig)
    assert [ax.get_title() for ax in panels] == [f"threat model = {tm}" for tm in THREAT_MODELS]
    family = next(line for line in panels[2].get_lines() if line.get_label() == "ε lower bound (family)")
    np.testing.assert_allclose(family.get_xdata(), [1.0, 4.0])


def test_a_scatter_at_one_x_lists_its_series_as_rows_with_their_values(tmp_path):
    path = tmp_path / "simulation.csv"
    path.write_text("ratio_family,ratio_sweep,epsilon_target\n0.985,0.619,2\n")
    spec = FigureSpec("sim", "Simulation", "scatter", str(path), "epsilon_target",
                      ["ratio_family", "ratio_sweep"], "target ε", "ε_LB/ε_PLD")  # fmt: skip
    fig = draw_figure(spec, tmp_path)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["ratio family", "ratio sweep"]
    assert sorted(t.get_text() for t in ax.texts) == ["0.619", "0.985"]
    assert fig.legends == []  # the rows name the series; nothing is a bound or an estimate
