"""Render a declarative :class:`~dpaudit.results.FigureSpec` from its CSV to PNG bytes.

Experiments describe their plots as data (a CSV under ``plots/`` and the columns to draw), so
the report can draw any experiment's figures without knowing the experiment, and ``dvc plots``
can read the same files. Figures are drawn with matplotlib's object API on an Agg canvas (no
pyplot global state, no display needed).

Semantics of the spec fields, per ``kind``:

- ``line`` / ``step`` / ``scatter``: one series per column in ``y`` (× each value of ``group``),
  ``x`` on the horizontal axis; rows are sorted by ``x`` for lines and steps (``step`` draws
  ``steps-post``, e.g. an ROC curve or a belief trajectory).
- ``bar``: grouped bars, one bar per series at each distinct ``x`` value (a category, in
  order of first appearance).
- ``histogram``: the raw values of column ``x`` are binned (one overlaid histogram per value of
  ``group``); each column in ``y``, if any, is used as a weight column (one series each), so
  ``y`` may be empty. ``y_label`` names the count.
- ``facet``: one panel per value of that column, sharing both axes.
- ``highlight``: a boolean column; its true rows are drawn as one connected, emphasised series
  (sorted by ``x``), e.g. a Pareto frontier.
- ``diagonal``: the reference line y = x; ``hlines``: labelled horizontal reference lines.
- ``intervals``: (low, high) columns drawn as vertical error bars on a scatter's points.

A ``line`` or ``scatter`` whose data hold a single ``x`` value (e.g. one target ε at default
settings) would draw one point per series and panel, so it is drawn as a dot chart instead
(:func:`draw_dot_chart`): one row per facet × group value, the ``y`` columns as markers on one
horizontal axis, each marked by what its name says it is (lower bound, upper bound, estimate).
"""

from __future__ import annotations

import io
import itertools
import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpaudit.bounds.accountants import ACCOUNTANTS
from dpaudit.results import FigureSpec

PANEL_SIZE = (5.5, 3.75)
TITLE_HEIGHT = 0.5
TITLE_CHARS_PER_INCH = 8  # wrap figure titles at about this many characters per inch of width
LEGEND_INSIDE_MAX = 4  # legends with more entries go beside the axes
DPI = 100
MAX_COLUMNS = 3
TICK_CHARS_PER_INCH = 11  # wrap bar-chart category labels to about this many characters per inch
TICK_GAP_PX = 4  # neighbouring tick labels closer than this count as printed over each other
DOT_WIDTH = 9.0  # inches
DOT_ROW_HEIGHT = 0.42  # inches per row of a dot chart
DOT_FIXED_HEIGHT = 2.0  # inches for a dot chart's title, axis and legend
_TRUE_STRINGS = frozenset({"true", "1", "yes", "y", "t"})
_FALSE_STRINGS = frozenset({"false", "0", "no", "n", "f", ""})


class FigureError(ValueError):
    """A figure cannot be drawn: missing CSV, missing column, or unusable data."""


def _label(text: object) -> str:
    """Short, readable legend text for a group value (numbers without a trailing .0)."""
    if isinstance(text, float) and text.is_integer():
        text = int(text)
    return str(text)


#: Column-name phrases and their human names; what follows a phrase is put in parentheses.
HUMAN_PHRASES = {
    "rho_beta": "ρβ",
    "rho_alpha": "ρα",
    "epsilon_star": "Epsilon*",
    "epsilon_prime": "ε′",
    "epsilon_lower": "ε lower bound",
    "epsilon_upper": "ε upper bound",
    "epsilon_estimate": "ε estimate",
    "eps_lb": "ε lower bound",
    "eps_ub": "ε upper bound",
    "epsilon": "ε",
    "eps": "ε",
}
_PERCENT_NAME = re.compile(r"_(\d+)(?:_(\d+))?pct")  # tpr_0_1pct → "tpr 0.1%"
_DECIMAL_WORD = re.compile(r"^(\d+)p(\d+)$")
#: Single words of column names and their human spelling.
HUMAN_WORDS = {
    "tpr": "TPR", "fpr": "FPR", "auroc": "AUROC", "pld": "PLD", "rdp": "RDP", "cp": "CP", "ls": "LS",
    "gs": "GS", "di": "DI", "mi": "MI", "adv": "Adv", "lb": "lower bound", "ub": "upper bound",
    "gdp": "GDP", "fdp": "f-DP", "p05": "5th pct.", "p95": "95th pct.", "abs": "|·|",
}  # fmt: skip


def human(name: object) -> str:
    """A column name as people read it: ``rho_beta`` → "ρβ", ``epsilon_lower_sweep`` → "ε lower
    bound (sweep)", ``epsilon_pld`` → "ε (PLD)", ``cp_cap`` → "CP cap". Text that is not a
    snake_case identifier (a group value, a label already written for people) is left as it is."""
    text = _label(name)
    if not text.isidentifier() or text.isupper():
        return text
    text = _PERCENT_NAME.sub(lambda m: f"_{m.group(1)}{'.' + m.group(2) if m.group(2) else ''}%", text)
    for phrase, spelled in HUMAN_PHRASES.items():
        if text == phrase or text.startswith(phrase + "_"):
            rest = text[len(phrase) + 1 :]
            return spelled + (f" ({human(rest)})" if rest else "")
    words = [_DECIMAL_WORD.sub(r"\1.\2", w) for w in text.split("_") if w]  # 0p001 → 0.001
    return " ".join(HUMAN_WORDS.get(w, w) for w in words) if words else text


def load_figure_data(spec: FigureSpec, root: Path) -> pd.DataFrame:
    """Read the spec's CSV (relative to ``root`` unless absolute) and check every named column exists."""
    path = Path(spec.data)
    if not path.is_absolute():
        path = root / path
    if not path.is_file():
        raise FigureError(f"figure {spec.id!r}: data file {path} does not exist")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise FigureError(f"figure {spec.id!r}: {path} is not a readable CSV: {exc}") from exc
    needed = [("x", spec.x)] + [("y", column) for column in spec.y]
    needed += [(name, getattr(spec, name)) for name in ("group", "facet", "highlight") if getattr(spec, name)]
    needed += [("interval", column) for column in spec.intervals or ()]
    for role, column in needed:
        if column not in frame.columns:
            raise FigureError(
                f"figure {spec.id!r}: column {column!r} (its {role}) is not in {path}; "
                f"columns there: {', '.join(map(str, frame.columns))}"
            )
    if frame.empty:
        raise FigureError(f"figure {spec.id!r}: {path} has no data rows")
    if spec.kind != "histogram" and not spec.y:
        raise FigureError(f"figure {spec.id!r}: kind {spec.kind!r} needs at least one y column")
    return frame


def _as_bool(series: pd.Series, spec: FigureSpec, column: str) -> np.ndarray:
    """Interpret a CSV column as booleans (True/False, 1/0, yes/no); anything else is an error."""
    if series.dtype == bool:
        return series.to_numpy()
    if pd.api.types.is_numeric_dtype(series):
        return series.fillna(0).to_numpy() != 0
    lowered = series.fillna("").astype(str).str.strip().str.lower()
    unknown = sorted(set(lowered) - _TRUE_STRINGS - _FALSE_STRINGS)
    if unknown:
        raise FigureError(
            f"figure {spec.id!r}: highlight column {column!r} has non-boolean values {unknown[:3]}"
        )
    return lowered.isin(_TRUE_STRINGS).to_numpy()


def _numeric(frame: pd.DataFrame, column: str, spec: FigureSpec) -> pd.Series:
    values = pd.to_numeric(frame[column], errors="coerce")
    if values.notna().sum() == 0 and frame[column].notna().any():
        raise FigureError(f"figure {spec.id!r}: column {column!r} of {spec.data} holds no numbers")
    return values


def _drawable(values: pd.Series, log: bool) -> pd.Series:
    """Which values can be drawn: finite, and positive on a log axis (zeros would fall off the axis)."""
    finite = pd.Series(np.isfinite(values.to_numpy(dtype=float, na_value=np.nan)), index=values.index)
    return finite & (values > 0) if log else finite


def _series(frame: pd.DataFrame, spec: FigureSpec) -> list[tuple[str, pd.DataFrame, str | None]]:
    """Split a panel's rows into (label, rows, y column) series by ``group`` and the ``y`` columns."""
    groups: list[tuple[str | None, pd.DataFrame]]
    if spec.group:
        groups = [
            (_label(value), rows) for value, rows in frame.groupby(spec.group, sort=False, dropna=False)
        ]
    else:
        groups = [(None, frame)]
    y_columns: Sequence[str | None] = spec.y if spec.y else [None]
    out = []
    for group_label, rows in groups:
        for column in y_columns:
            parts = []
            if column is not None and (len(y_columns) > 1 or group_label is None):
                parts.append(human(column))
            if group_label is not None:
                parts.append(group_label)
            out.append((", ".join(parts) if parts else human(spec.x), rows, column))
    return out


def _draw_panel(ax: Axes, frame: pd.DataFrame, spec: FigureSpec) -> None:
    """Draw one panel's series, highlight, diagonal and reference lines."""
    series = _series(frame, spec)
    if spec.kind == "bar":
        categories = list(dict.fromkeys(frame[spec.x].tolist()))
        positions = {value: i for i, value in enumerate(categories)}
        width = 0.8 / max(len(series), 1)
        for k, (label, rows, column) in enumerate(series):
            heights = _numeric(rows, column, spec)
            xs = np.array([positions[v] for v in rows[spec.x]], dtype=float) - 0.4 + width * (k + 0.5)
            ax.bar(xs, heights.to_numpy(), width=width, label=label)
        width_chars = max(8, int(TICK_CHARS_PER_INCH * PANEL_SIZE[0] / max(len(categories), 1)))
        wrapped = [textwrap.fill(_label(c), width=width_chars, break_long_words=False) for c in categories]
        ax.set_xticks(range(len(categories)), wrapped)
    elif spec.kind == "histogram":
        values_all = _numeric(frame, spec.x, spec)
        values_all = values_all[_drawable(values_all, spec.x_log)].to_numpy(dtype=float)
        if values_all.size == 0:
            raise FigureError(f"figure {spec.id!r}: column {spec.x!r} of {spec.data} has no drawable values")
        count = min(30, max(5, int(math.sqrt(values_all.size))))
        if spec.x_log and values_all.min() < values_all.max():
            bins = np.geomspace(values_all.min(), values_all.max(), count + 1)
        else:
            bins = np.histogram_bin_edges(values_all, bins=count)
        for label, rows, column in series:
            values = _numeric(rows, spec.x, spec)
            weights = _numeric(rows, column, spec) if column is not None else pd.Series(1.0, index=rows.index)
            keep = _drawable(values, spec.x_log) & _drawable(weights, False)
            ax.hist(
                values[keep],
                bins=bins,
                weights=weights[keep],
                alpha=0.55,
                label=label,
                histtype="stepfilled",
                edgecolor="black",
                linewidth=0.6,
            )
    else:
        for label, rows, column in series:
            xs = _numeric(rows, spec.x, spec)
            ys = _numeric(rows, column, spec)
            keep = _drawable(xs, spec.x_log) & _drawable(ys, spec.y_log)
            xs, ys = xs[keep], ys[keep]
            if spec.kind == "scatter" and spec.intervals:
                low, high = (_numeric(rows, c, spec)[keep].to_numpy() for c in spec.intervals)
                errors = np.vstack([np.maximum(ys - low, 0.0), np.maximum(high - ys, 0.0)])
                ax.errorbar(xs, ys, yerr=errors, fmt="o", markersize=4.5, capsize=3, label=label)
            elif spec.kind == "scatter":
                ax.scatter(xs, ys, label=label, s=22, alpha=0.8)
            else:
                order = np.argsort(xs.to_numpy(), kind="stable")
                drawstyle = "steps-post" if spec.kind == "step" else "default"
                ax.plot(
                    xs.to_numpy()[order],
                    ys.to_numpy()[order],
                    marker="o" if spec.kind == "line" else None,
                    markersize=3.5,
                    drawstyle=drawstyle,
                    label=label,
                )
    if spec.highlight and spec.kind in ("line", "scatter", "step"):
        mask = _as_bool(frame[spec.highlight], spec, spec.highlight)
        chosen = frame[mask]
        for k, column in enumerate(spec.y):
            xs = _numeric(chosen, spec.x, spec)
            ys = _numeric(chosen, column, spec)
            keep = _drawable(xs, spec.x_log) & _drawable(ys, spec.y_log)
            order = np.argsort(xs[keep].to_numpy(), kind="stable")
            if keep.any():
                name = human(spec.highlight)
                ax.plot(
                    xs[keep].to_numpy()[order],
                    ys[keep].to_numpy()[order],
                    color="black",
                    linewidth=2.2,
                    marker="D",
                    markersize=6,
                    markerfacecolor="none",
                    zorder=5,
                    label=name if k == 0 else f"{name} ({human(column)})",
                )
    if spec.diagonal:
        low = min(ax.get_xlim()[0], ax.get_ylim()[0])
        high = max(ax.get_xlim()[1], ax.get_ylim()[1])
        if spec.x_log or spec.y_log:
            low = max(low, 1e-6)
        ax.plot([low, high], [low, high], linestyle=":", color="grey", linewidth=1.2, label="y = x")
    for k, (name, value) in enumerate(spec.hlines.items()):
        ax.axhline(
            float(value),
            linestyle="--",
            linewidth=1.1,
            color=f"C{(k + 6) % 10}",
            label=f"{human(name)} = {value:g}",
        )
    if spec.x_log:
        ax.set_xscale("log")
    if spec.y_log:
        ax.set_yscale("log")
    if spec.x_limits is not None:
        ax.set_xlim(*spec.x_limits)
    if spec.y_limits is not None:
        ax.set_ylim(*spec.y_limits)
    ax.grid(True, alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    if len(handles) > 1 or spec.group or spec.hlines or spec.diagonal or spec.highlight:
        # Many entries would hide the data: put them beside the axes instead of inside.
        outside = (
            {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)} if len(handles) > LEGEND_INSIDE_MAX else {}
        )
        title = human(spec.group) if spec.group else None
        ax.legend(fontsize="small", title=title, title_fontsize="small", **outside)


def to_png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def render_figure(spec: FigureSpec, root: Path, level: float | None = None) -> bytes:
    """Draw ``spec`` from its CSV (path relative to ``root``) and return the PNG file's bytes;
    ``level`` is the audit's joint confidence, written beside the lower bounds of a dot chart."""
    return to_png(draw_figure(spec, root, level))


def overlapping_tick_labels(ax: Axes) -> int:
    """How many neighbouring x tick labels of ``ax`` overlap on the drawn canvas."""
    renderer = ax.figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
    boxes.sort(key=lambda b: b.x0)
    return sum(1 for a, b in itertools.pairwise(boxes) if a.x1 + TICK_GAP_PX > b.x0)


def _unclutter_ticks(fig: Figure) -> None:
    """Turn upright, then shrink, the x tick labels of any panel whose labels would print over each
    other. Upright (90°) labels keep their boxes exact, so the overlap test stays a true one."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    for ax in fig.axes:
        if not ax.get_visible() or not overlapping_tick_labels(ax):
            continue
        ax.tick_params(axis="x", labelrotation=90)
        fig.canvas.draw()
        size = float(ax.get_xticklabels()[0].get_fontsize()) if ax.get_xticklabels() else 0.0
        while overlapping_tick_labels(ax) and size > 5:
            size -= 1
            ax.tick_params(axis="x", labelsize=size)
            fig.canvas.draw()


def draw_figure(spec: FigureSpec, root: Path, level: float | None = None) -> Figure:
    """The matplotlib figure of ``spec`` (see :func:`render_figure`), with no overprinted tick labels;
    a dot chart (:func:`draw_dot_chart`) when a line or scatter has a single x value."""
    frame = load_figure_data(spec, root)
    if (x_value := single_x(frame, spec)) is not None:
        return draw_dot_chart(frame, spec, x_value, level)
    if spec.facet:
        panels = [
            (_label(value), rows) for value, rows in frame.groupby(spec.facet, sort=False, dropna=False)
        ]
    else:
        panels = [(None, frame)]
    ncols = min(len(panels), MAX_COLUMNS)
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(PANEL_SIZE[0] * ncols, PANEL_SIZE[1] * nrows + TITLE_HEIGHT), layout="constrained")
    axes = fig.subplots(
        nrows, ncols, sharex=bool(spec.facet) and spec.kind != "bar", sharey=True, squeeze=False
    )
    for ax, (facet_label, rows) in zip(axes.flat, panels, strict=False):
        _draw_panel(ax, rows, spec)
        ax.set_xlabel(spec.x_label)
        ax.set_ylabel(spec.y_label)
        ax.tick_params(labelbottom=True, labelleft=True)  # every panel readable on its own
        if facet_label is not None:
            ax.set_title(f"{human(spec.facet)} = {facet_label}", fontsize="medium")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(textwrap.fill(spec.title, width=int(TITLE_CHARS_PER_INCH * PANEL_SIZE[0] * ncols)))
    _unclutter_ticks(fig)
    return fig


def single_x(frame: pd.DataFrame, spec: FigureSpec) -> float | None:
    """The x value of a line or scatter whose rows all share one (a one-point-per-series plot), else None."""
    if spec.kind not in ("line", "scatter"):
        return None
    values = _numeric(frame, spec.x, spec).dropna().unique()
    return float(values[0]) if len(values) == 1 else None


def column_role(column: str) -> str:
    """What a y column holds, read from its name: ``lower`` (a valid lower bound: ``epsilon_lower_*``,
    ``eps_lb``), ``estimate`` (``*estimate*``, Epsilon*, ε′: never a bound), ``upper`` (an accountant:
    ``epsilon_upper_*``, ``eps_ub``, ``epsilon_<accountant>``) or ``other`` (a cap, a ratio, …)."""
    name = column.lower()
    if "ratio" in name:
        return "other"
    if "estimate" in name or name.startswith(("epsilon_star", "epsilon_prime")):
        return "estimate"
    if name.startswith(("epsilon_lower", "eps_lb")):
        return "lower"
    if name.startswith(("epsilon_upper", "eps_ub")) or name in {f"epsilon_{a}" for a in ACCOUNTANTS}:
        return "upper"
    return "other"


#: Marker, fill and legend words of each :func:`column_role` in a dot chart.
DOT_STYLE = {"lower": ("o", True, "proven lower bound"), "upper": ("s", False, "upper bound (accountant)"),
             "estimate": ("x", True, "estimate, not a bound"), "other": ("D", False, "")}  # fmt: skip
#: What columns that are neither bound nor estimate mean, for the dot chart's legend.
COLUMN_NOTES = {"cp_cap": "the most these trials can prove"}
REGION_BAR_LABEL = "true ε lies here: from the largest lower to the smallest upper bound"
#: Series colours of a dot chart: green and red are left to its bars.
DOT_COLOURS = ("C0", "C1", "C4", "C9", "C6", "C8", "C5", "C7")


def _dot_label(column: str, level: float | None) -> str:
    role = column_role(column)
    words = DOT_STYLE[role][2] or COLUMN_NOTES.get(column, "")
    if role == "lower" and level is not None:
        words += f", joint {level * 100:g} %"
    return f"{human(column)}: {words}" if words else human(column)


def _dot_rows(frame: pd.DataFrame, spec: FigureSpec) -> list[tuple[str, pd.DataFrame, list[str]]]:
    """(row label, rows, y columns) of a dot chart: one per facet × group value, else one per y column."""
    keys = [c for c in (spec.facet, spec.group) if c]
    if not keys:
        return [(human(column), frame, [column]) for column in spec.y]
    groups = frame.groupby(keys, sort=False, dropna=False)
    return [(", ".join(_label(v) for v in key), rows, list(spec.y)) for key, rows in groups]


def draw_dot_chart(frame: pd.DataFrame, spec: FigureSpec, x_value: float, level: float | None) -> Figure:
    """A line or scatter at one x value as dots on one axis (``y_label``), one row per category.

    Lower bounds are filled dots, accountants' upper bounds open squares, estimates crosses (never
    a bound); a light bar joins a row's largest lower bound to its smallest upper bound (red when
    the lower one is larger). The x value is the subtitle, and a dashed line where ``diagonal`` puts
    it on the same scale as y (e.g. the target ε). A scatter's ``intervals`` become error bars.
    """
    if spec.highlight:
        _as_bool(frame[spec.highlight], spec, spec.highlight)  # a bad column is an error here too
    rows = _dot_rows(frame, spec)
    per_column = not (spec.facet or spec.group)  # one row per y column: its label is the row's
    fig = Figure(figsize=(DOT_WIDTH, DOT_FIXED_HEIGHT + DOT_ROW_HEIGHT * len(rows)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    colours = {column: DOT_COLOURS[k % len(DOT_COLOURS)] for k, column in enumerate(spec.y)}
    for i, (_, part, columns) in enumerate(rows):
        drawn: dict[str, list[float]] = {"lower": [], "upper": []}
        step = min(0.6 / max(len(columns), 1), 0.16)  # equal values side by side, not hidden
        for k, column in enumerate(columns):
            values = _numeric(part, column, spec)
            keep = _drawable(values, spec.y_log)
            marker, filled, _ = DOT_STYLE[column_role(column)]
            y = i + (k - (len(columns) - 1) / 2) * step
            xerr = None
            if spec.intervals and spec.kind == "scatter":
                low, high = (_numeric(part, c, spec)[keep].to_numpy() for c in spec.intervals)
                xerr = np.vstack([np.maximum(values[keep] - low, 0.0), np.maximum(high - values[keep], 0.0)])
            ax.errorbar(
                values[keep].to_numpy(), np.full(int(keep.sum()), y), xerr=xerr, fmt=marker, capsize=3,
                color=colours[column], markerfacecolor=colours[column] if filled else "none", markersize=7,
                label=_dot_label(column, level),
            )  # fmt: skip
            if column_role(column) in drawn:
                drawn[column_role(column)] += values[keep].tolist()
            for value in values[keep] if per_column else ():
                ax.annotate(f"{value:.3g}", (value, y), xytext=(7, 0), textcoords="offset points",
                            va="center", fontsize="small")  # fmt: skip
        if drawn["lower"] and drawn["upper"]:
            low, high = max(drawn["lower"]), min(drawn["upper"])
            ax.plot([low, high], [i, i], color="tab:red" if low > high else "tab:green", linewidth=9,
                    alpha=0.25, solid_capstyle="butt", zorder=0,
                    label="lower > upper: check" if low > high else REGION_BAR_LABEL)  # fmt: skip
            if low > 0:  # the best proven value, below its dots, to read without the axis
                ax.annotate(f"{low:.3g}", (low, i), xytext=(0, -9), textcoords="offset points",
                            ha="center", va="top", fontsize="small")  # fmt: skip
    if spec.diagonal:
        ax.axvline(x_value, linestyle="--", color="grey", label=f"{spec.x_label} = {x_value:g}")
    ax.set_yticks(range(len(rows)), [label for label, _, _ in rows])
    ax.set_ylim(len(rows) - 0.25, -0.5)  # first row on top; room for the last row's value below it
    ax.margins(x=0.08)  # room for the values written beside the dots
    ax.set_ylabel(", ".join(human(c) for c in (spec.facet, spec.group) if c))
    ax.set_xlabel(spec.y_label)
    if spec.y_log:
        ax.set_xscale("log")
    if spec.y_limits is not None:
        ax.set_xlim(*spec.y_limits)
    ax.grid(True, axis="x", alpha=0.3)
    subtitle = f"at the one {spec.x_label} of this run: {x_value:g}"
    title = textwrap.fill(spec.title, width=int(TITLE_CHARS_PER_INCH * 1.4 * DOT_WIDTH))
    fig.suptitle(f"{title}\n{subtitle}")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if not per_column or spec.diagonal or any(column_role(c) != "other" for c in spec.y):
        fig.legend(unique.values(), unique.keys(), fontsize="small", loc="outside lower center", ncol=2)
    return fig
