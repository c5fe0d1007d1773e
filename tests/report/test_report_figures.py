"""FigureSpec rendering: every kind gives a decodable PNG of the right size; bad specs name the problem."""

from __future__ import annotations

import dataclasses
import io
import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from dpaudit.report.figures import (
    DPI,
    PANEL_SIZE,
    TITLE_HEIGHT,
    FigureError,
    _draw_panel,
    draw_figure,
    human,
    load_figure_data,
    overlapping_tick_labels,
    render_figure,
)
from dpaudit.report.region import (
    CLIP_FACTOR,
    CLIPPED_LABEL,
    REGION_COLUMNS,
    REGION_PANEL_HEIGHT,
    REGION_ROW_HEIGHT,
    ZERO_LABEL,
    region_of_privacy_data,
    region_of_privacy_figure,
    region_of_privacy_png,
)
from dpaudit.results import FigureSpec, ReportSection, SummaryRow


def _specs(root: Path) -> dict[str, FigureSpec]:
    specs = {}
    for path in sorted((root / "data" / "bounds").glob("*/section.json")):
        for spec in ReportSection.load(path).figures:
            specs[spec.id] = spec
    return specs


def _png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        return image.size


def test_every_kind_renders_a_png_of_the_expected_size(fake_root):
    specs = _specs(fake_root)
    assert {s.kind for s in specs.values()} == {"line", "scatter", "bar", "histogram", "step"}
    for spec in specs.values():
        png = render_figure(spec, fake_root)
        width, height = _png_size(png)
        # region.csv's facet column has a single value, so every figure here is one panel.
        assert width == round(PANEL_SIZE[0] * DPI), spec.id
        assert height == round((PANEL_SIZE[1] + TITLE_HEIGHT) * DPI), spec.id
        with Image.open(io.BytesIO(png)) as image:
            colours = np.asarray(image.convert("L"))
        assert colours.std() > 5, f"{spec.id} looks blank"


def test_facets_make_one_panel_per_value_in_rows_of_three(fake_root):
    path = fake_root / "plots" / "facets.csv"
    rows = [f"{x},{x * k},{k}" for k in range(1, 5) for x in range(1, 4)]
    path.write_text("x,y,panel\n" + "\n".join(rows) + "\n")
    spec = FigureSpec("f", "Facets", "line", str(path), "x", ["y"], "x", "y", facet="panel")
    width, height = _png_size(render_figure(spec, fake_root))
    assert (width, height) == (
        round(PANEL_SIZE[0] * 3 * DPI),
        round((PANEL_SIZE[1] * 2 + TITLE_HEIGHT) * DPI),
    )


def _panel(spec: FigureSpec, root: Path):
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    _draw_panel(ax, load_figure_data(spec, root), spec)
    return ax


def test_highlight_connects_the_true_rows_sorted_by_x(fake_root):
    spec = _specs(fake_root)["utility"]
    ax = _panel(spec, fake_root)
    frontier = [line for line in ax.get_lines() if line.get_label() == "pareto"]
    assert len(frontier) == 1
    np.testing.assert_allclose(frontier[0].get_xdata(), [0.5, 1.0, 4.0, 16.0])
    np.testing.assert_allclose(frontier[0].get_ydata(), [0.70, 0.76, 0.81, 0.83])
    assert ax.get_xscale() == "log"


def test_groups_hlines_and_diagonal_appear_in_the_legend(fake_root):
    specs = _specs(fake_root)
    beliefs = _panel(specs["beliefs"], fake_root)
    assert [t.get_text() for t in beliefs.get_legend().get_texts()] == ["global", "local", "ρβ = 0.9"]
    eps = _panel(specs["eps"], fake_root)
    diagonal = [line for line in eps.get_lines() if line.get_label() == "y = x"]
    assert len(diagonal) == 1
    np.testing.assert_allclose(diagonal[0].get_xdata(), diagonal[0].get_ydata())
    series = {line.get_label(): line for line in eps.get_lines()}
    np.testing.assert_allclose(series["bounded"].get_ydata(), [0.05, 0.9, 1.8, 3.1])


def test_bar_groups_side_by_side(fake_root):
    ax = _panel(_specs(fake_root)["rotated"], fake_root)
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights == [0.9, 4.1, 12.0, 125.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["z=1", "z=4"]
    assert ax.get_yscale() == "log"


def test_missing_column_names_file_and_column(fake_root):
    spec = dataclasses.replace(_specs(fake_root)["roc"], y=["tpr_at_5pct"])
    with pytest.raises(FigureError, match=r"'tpr_at_5pct'.*roc\.csv.*columns there: fpr, tpr, noise"):
        render_figure(spec, fake_root)
    spec = dataclasses.replace(_specs(fake_root)["roc"], group="trial")
    with pytest.raises(FigureError, match=r"'trial' \(its group\)"):
        render_figure(spec, fake_root)


def test_missing_csv_names_the_path(fake_root):
    spec = dataclasses.replace(_specs(fake_root)["roc"], data="plots/nowhere/roc.csv")
    with pytest.raises(FigureError, match=r"'roc'.*plots/nowhere/roc\.csv does not exist"):
        render_figure(spec, fake_root)


def test_unusable_data_is_a_clear_error(fake_root):
    empty = fake_root / "plots" / "empty.csv"
    empty.write_text("x,y\n")
    with pytest.raises(FigureError, match="has no data rows"):
        render_figure(FigureSpec("e", "E", "line", str(empty), "x", ["y"], "x", "y"), fake_root)
    bad = fake_root / "plots" / "bad.csv"
    bad.write_text("x,y,flag\n1,2,maybe\n")
    with pytest.raises(FigureError, match=r"highlight column 'flag' has non-boolean values \['maybe'\]"):
        render_figure(
            FigureSpec("b", "B", "scatter", str(bad), "x", ["y"], "x", "y", highlight="flag"), fake_root
        )
    with pytest.raises(FigureError, match="needs at least one y column"):
        render_figure(FigureSpec("b", "B", "line", str(bad), "x", [], "x", "y"), fake_root)


def test_region_of_privacy_grows_with_rows_and_panels_and_skips_rows_without_numbers():
    row = SummaryRow("z=1", {"rdp": 3.0, "naive": math.inf}, 0.5, "split", {}, None, None)
    empty = SummaryRow("none", {"rdp": None}, None, None, {}, "accuracy", 0.9)
    star_only = SummaryRow("non-DP", {}, None, None, {"epsilon_star": 1.0}, "accuracy", 0.9)
    assert region_of_privacy_png([("a", empty)]) is None
    one = _png_size(region_of_privacy_png([("a", row), ("a", empty)]))
    three = _png_size(region_of_privacy_png([("a", row), ("a", row), ("a", star_only)]))
    two_audits = _png_size(region_of_privacy_png([("a", row), ("b", row)]))
    assert one[0] == three[0] == two_audits[0] == 900
    assert abs(three[1] - one[1] - 2 * REGION_ROW_HEIGHT * DPI) <= 1  # a row more: one row's height
    # An audit more: one row and one panel (its title and ε tick labels) more.
    assert abs(two_audits[1] - one[1] - (REGION_ROW_HEIGHT + REGION_PANEL_HEIGHT) * DPI) <= 1


def test_region_of_privacy_draws_only_valid_lower_bounds_and_keeps_estimates_apart():
    """Estimates (Epsilon*) never appear as a lower bound: the only lower-bound column is the row's
    valid bound, labelled by its estimator and assumption; Epsilon* lives in an ``estimate_`` column."""
    gdp = SummaryRow("ρβ=0.99", {"rdp": 4.6, "pld": 4.5}, 3.7, "GDP; joint 95%", {}, None, None, "Gaussian")
    star_only = SummaryRow("non-DP", {}, None, None, {"epsilon_star": 1.0}, "accuracy", 0.9)
    frame = region_of_privacy_data([("a", gdp), ("b", star_only)])
    assert tuple(frame.columns) == REGION_COLUMNS
    lower_columns = [c for c in frame.columns if "lower" in c]
    assert lower_columns == ["epsilon_lower", "lower_estimator", "lower_assumes"]
    assert [c for c in frame.columns if "star" in c or "estimate" in c] == ["estimate_epsilon_star"]
    first, second = frame.to_dict("records")
    assert first["epsilon_lower"] == 3.7 and first["lower_estimator"] == "GDP; joint 95%"
    assert first["lower_assumes"] == "Gaussian" and first["upper_accountant"] == "pld"
    assert first["epsilon_upper_tightest"] == 4.5
    assert second["estimate_epsilon_star"] == 1.0
    assert second["epsilon_lower"] is None or math.isnan(second["epsilon_lower"])


def test_non_finite_and_non_positive_values_are_not_drawn_on_log_axes(fake_root):
    path = fake_root / "plots" / "zeros.csv"
    path.write_text("x,y\n1,1\n2,0\n3,inf\n4,4\n5,\n")
    spec = FigureSpec("z", "Z", "line", str(path), "x", ["y"], "x", "y", y_log=True)
    (line,) = _panel(spec, fake_root).get_lines()
    np.testing.assert_allclose(line.get_xdata(), [1, 4])
    linear = dataclasses.replace(spec, y_log=False)
    (line,) = _panel(linear, fake_root).get_lines()
    np.testing.assert_allclose(line.get_xdata(), [1, 2, 4])


def test_column_names_are_spelled_for_people():
    assert human("rho_beta") == "ρβ" and human("rho_alpha_rdp") == "ρα (RDP)"
    assert human("eps_lb") == "ε lower bound" and human("epsilon_lower_sweep") == "ε lower bound (sweep)"
    assert human("epsilon_pld") == "ε (PLD)" and human("cp_cap") == "CP cap"
    assert human("epsilon_star_null_mean") == "Epsilon* (null mean)" and human("tpr") == "TPR"
    assert human("population_tpr_0_1pct") == "population TPR 0.1%"
    assert human("canary_tpr_5pct") == "canary TPR 5%"
    assert human("population_tpr_at_fpr_0p001") == "population TPR at FPR 0.001"
    # Text already written for people, and group values, stay as they are.
    assert human("A: gradient canary") == "A: gradient canary" and human("TPR") == "TPR" and human(2.0) == "2"


def test_legends_and_facet_titles_use_human_names(fake_root):
    path = fake_root / "plots" / "human.csv"
    path.write_text("rho_beta,eps_lb,epsilon_pld,threat_model\n0.5,0.1,1,A\n0.9,0.8,2,A\n")
    spec = FigureSpec("h", "H", "line", str(path), "rho_beta", ["eps_lb", "epsilon_pld"], "ρβ", "ε",
                      facet="threat_model")  # fmt: skip
    fig = draw_figure(spec, fake_root)
    (ax,) = (a for a in fig.axes if a.get_visible())
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["ε lower bound", "ε (PLD)"]
    assert ax.get_title() == "threat model = A"


def test_rate_axes_keep_their_limits(fake_root):
    """An ROC with a diagonal stays inside [0, 1] on both axes (the diagonal may not widen them)."""
    path = fake_root / "plots" / "roc_limits.csv"
    path.write_text("fpr,tpr\n0,0\n0.2,0.6\n1,1\n")
    roc = FigureSpec("r", "ROC", "line", str(path), "fpr", ["tpr"], "FPR", "TPR", diagonal=True,
                     x_limits=(0.0, 1.0), y_limits=(0.0, 1.0))  # fmt: skip
    ax = _panel(roc, fake_root)
    assert ax.get_xlim() == (0.0, 1.0) and ax.get_ylim() == (0.0, 1.0)
    free = _panel(dataclasses.replace(roc, x_limits=None, y_limits=None), fake_root)
    assert free.get_xlim()[0] < 0 or free.get_xlim()[1] > 1  # matplotlib's margins leave [0, 1]
    log = _panel(dataclasses.replace(roc, x_log=True, y_log=True, x_limits=(None, 1.0), y_limits=(None, 1.0)),
                 fake_root)  # fmt: skip
    assert log.get_xlim()[1] == 1.0 and log.get_ylim()[1] == 1.0
    # The limits survive the section's JSON round trip.
    section = ReportSection("d", "e", "t", "", SummaryRow("s", {}, None, None), [], [], [roc])
    section.save(fake_root / "s.json")
    assert ReportSection.load(fake_root / "s.json").figures == [roc]


def test_bar_chart_tick_labels_do_not_print_over_each_other(fake_root):
    path = fake_root / "plots" / "long_bars.csv"
    names = [f"{t}: a threat model with a long descriptive name" for t in "ABCDEF"]
    path.write_text("threat_model,eps\n" + "".join(f"{n},{i + 1}\n" for i, n in enumerate(names)))
    spec = FigureSpec("b", "Bars", "bar", str(path), "threat_model", ["eps"], "threat model", "ε")
    crowded = Figure(figsize=PANEL_SIZE)
    FigureCanvasAgg(crowded)
    raw_ax = crowded.subplots()
    _draw_panel(raw_ax, load_figure_data(spec, fake_root), dataclasses.replace(spec))
    for label in raw_ax.get_xticklabels():  # the labels as one line each: they do collide
        label.set_text(label.get_text().replace("\n", " "))
    crowded.canvas.draw()
    assert overlapping_tick_labels(raw_ax) > 0
    fig = draw_figure(spec, fake_root)
    assert all(overlapping_tick_labels(ax) == 0 for ax in fig.axes)
    assert [t.get_text().replace("\n", " ") for t in fig.axes[0].get_xticklabels()] == names


def test_region_of_privacy_log_axis_clips_loose_compositions_and_marks_zero_bounds():
    tight = SummaryRow("z=1", {"rdp": 3.0, "pld": 2.5, "naive": 20.0, "advanced": 1e46}, 0.0, "split", {})
    other = SummaryRow("z=4", {"rdp": 0.9, "pld": 0.8, "naive": 5.0}, 0.4, "split", {})
    fig = region_of_privacy_figure([("a", tight), ("a", other)])
    assert fig is not None
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    clip = CLIP_FACTOR * 3.0  # the largest value but the loose accountants' is rdp's 3
    assert clip < ax.get_xlim()[1] <= 2 * clip
    drawn = [x for line in ax.get_lines() for x in np.atleast_1d(line.get_xdata())]
    assert max(drawn) <= clip and 20.0 in drawn  # naive 20 is inside the axis, advanced 1e46 is not
    labels = {line.get_label() for line in ax.get_lines()}
    assert CLIPPED_LABEL in labels and ZERO_LABEL in labels
    assert any("advanced 1e+46" in t.get_text() for t in ax.texts)
    assert ax.get_xlim()[0] > 0


def test_scatter_intervals_are_drawn_as_error_bars_from_low_to_high(fake_root):
    path = fake_root / "plots" / "iv.csv"
    path.write_text("x,y,low,high,name\n0.9,0.5,0.4,0.7,a\n0.95,0.2,0.1,0.25,b\n")
    spec = FigureSpec(
        "iv", "I", "scatter", str(path), "x", ["y"], "x", "y", group="name", intervals=("low", "high")
    )
    ax = _panel(spec, fake_root)
    segments = [seg for coll in ax.collections for seg in coll.get_segments()]
    spans = sorted((round(s[0][1], 6), round(s[1][1], 6)) for s in segments)
    assert spans == [(0.1, 0.25), (0.4, 0.7)]
    missing = dataclasses.replace(spec, intervals=("low", "upper"))
    with pytest.raises(FigureError, match="column 'upper'"):
        render_figure(missing, fake_root)
