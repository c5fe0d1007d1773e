"""Render a declarative :class:`~dpaudit.report.spec.FigureSpec` from its CSV to PNG bytes.

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
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpaudit.report.spec import FigureSpec, SummaryRow

PANEL_SIZE = (5.5, 3.75)
TITLE_HEIGHT = 0.5
TITLE_CHARS_PER_INCH = 8  # wrap figure titles at about this many characters per inch of width
LEGEND_INSIDE_MAX = 4  # legends with more entries go beside the axes
REGION_ROW_HEIGHT = 0.26  # inches per setting in the region-of-privacy overview
REGION_FIXED_HEIGHT = 1.8  # inches for its title, x axis and legend
DPI = 100
MAX_COLUMNS = 3
_TRUE_STRINGS = frozenset({"true", "1", "yes", "y", "t"})
_FALSE_STRINGS = frozenset({"false", "0", "no", "n", "f", ""})


class FigureError(ValueError):
    """A figure cannot be drawn: missing CSV, missing column, or unusable data."""


def _label(text: object) -> str:
    """Short, readable legend text for a column name or group value."""
    if isinstance(text, float) and text.is_integer():
        text = int(text)
    return str(text)


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
                parts.append(column)
            if group_label is not None:
                parts.append(group_label)
            out.append((", ".join(parts) if parts else spec.x, rows, column))
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
        ax.set_xticks(
            range(len(categories)), [_label(c) for c in categories], rotation=30 if len(categories) > 6 else 0
        )
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
            if spec.kind == "scatter":
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
                name = spec.highlight.replace("_", " ")
                ax.plot(
                    xs[keep].to_numpy()[order],
                    ys[keep].to_numpy()[order],
                    color="black",
                    linewidth=2.2,
                    marker="D",
                    markersize=6,
                    markerfacecolor="none",
                    zorder=5,
                    label=name if k == 0 else f"{name} ({column})",
                )
    if spec.diagonal:
        low = min(ax.get_xlim()[0], ax.get_ylim()[0])
        high = max(ax.get_xlim()[1], ax.get_ylim()[1])
        if spec.x_log or spec.y_log:
            low = max(low, 1e-6)
        ax.plot([low, high], [low, high], linestyle=":", color="grey", linewidth=1.2, label="y = x")
    for k, (name, value) in enumerate(spec.hlines.items()):
        ax.axhline(
            float(value), linestyle="--", linewidth=1.1, color=f"C{(k + 6) % 10}", label=f"{name} = {value:g}"
        )
    if spec.x_log:
        ax.set_xscale("log")
    if spec.y_log:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    if len(handles) > 1 or spec.group or spec.hlines or spec.diagonal or spec.highlight:
        # Many entries would hide the data: put them beside the axes instead of inside.
        outside = (
            {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)} if len(handles) > LEGEND_INSIDE_MAX else {}
        )
        ax.legend(fontsize="small", title=spec.group, title_fontsize="small", **outside)


def _to_png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def render_figure(spec: FigureSpec, root: Path) -> bytes:
    """Draw ``spec`` from its CSV (path relative to ``root``) and return the PNG file's bytes."""
    frame = load_figure_data(spec, root)
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
            ax.set_title(f"{spec.facet} = {facet_label}", fontsize="medium")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(textwrap.fill(spec.title, width=int(TITLE_CHARS_PER_INCH * PANEL_SIZE[0] * ncols)))
    return _to_png(fig)


#: Columns of :func:`region_of_privacy_data`: the valid lower bound (with its estimator and
#: assumption), the tightest upper bound, and estimates in columns named ``estimate_*`` only.
REGION_COLUMNS = (
    "audit",
    "setting",
    "epsilon_lower",
    "lower_estimator",
    "lower_assumes",
    "epsilon_upper_tightest",
    "upper_accountant",
    "estimate_epsilon_star",
)


def _region_rows(
    rows: Sequence[tuple[str, SummaryRow]],
) -> list[tuple[str, SummaryRow, float | None, str | None, float | None]]:
    """(audit, row, valid lower bound, tightest accountant, its ε) of every row with a finite value."""
    out = []
    for name, row in rows:
        uppers = {k: v for k, v in row.epsilon_upper.items() if v is not None and math.isfinite(v)}
        accountant = min(uppers, key=lambda k: uppers[k]) if uppers else None
        lower = (
            row.epsilon_lower if row.epsilon_lower is not None and math.isfinite(row.epsilon_lower) else None
        )
        star = row.epsilon_star is not None and math.isfinite(row.epsilon_star)
        if accountant is not None or lower is not None or star:
            out.append((name, row, lower, accountant, uppers[accountant] if accountant is not None else None))
    return out


def region_of_privacy_data(rows: Sequence[tuple[str, SummaryRow]]) -> pd.DataFrame:
    """The numbers the region-of-privacy figure draws, one row per setting with any finite value.

    ``epsilon_lower`` is the row's valid lower bound (``SummaryRow.epsilon_lower``, never an
    estimate), labelled by ``lower_estimator`` and ``lower_assumes``; ``epsilon_upper_tightest`` is
    the smallest accountant ε. Epsilon* (Negoescu et al.) is an estimate for one trained model: it
    lives only in ``estimate_epsilon_star`` and is drawn with its own marker, never as a bound.
    """
    records = [
        {
            "audit": name,
            "setting": row.setting,
            "epsilon_lower": lower,
            "lower_estimator": row.epsilon_lower_estimator if lower is not None else None,
            "lower_assumes": row.epsilon_lower_assumes if lower is not None else None,
            "epsilon_upper_tightest": upper,
            "upper_accountant": accountant,
            "estimate_epsilon_star": row.epsilon_star
            if row.epsilon_star is not None and math.isfinite(row.epsilon_star)
            else None,
        }
        for name, row, lower, accountant, upper in _region_rows(rows)
    ]
    return pd.DataFrame(records, columns=list(REGION_COLUMNS))


def region_of_privacy_png(rows: Sequence[tuple[str, SummaryRow]]) -> bytes | None:
    """Horizontal intervals from the best ε lower bound to the tightest accountant's ε upper bound.

    The span between them is where the true privacy loss lies (Erlingsson et al. §5.3, "region of
    privacy"); drawn here for every setting of every audit so they compare at a glance, with Epsilon*
    of the trained model where known (Negoescu et al.) as a separate marker labelled an estimate.
    The lower bound drawn is only ever the row's valid bound (:func:`region_of_privacy_data`).
    Returns ``None`` when no row has a finite value. The x axis is symmetric-log so that a lower
    bound of 0 shows.
    """
    usable = [(name, row, lower, upper) for name, row, lower, _, upper in _region_rows(rows)]
    if not usable:
        return None
    fig = Figure(figsize=(9.0, REGION_FIXED_HEIGHT + REGION_ROW_HEIGHT * len(usable)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    accountants = sorted({k for _, row, _, _ in usable for k in row.epsilon_upper})
    markers = dict(zip(accountants, "s^vP*Xhd", strict=False))
    for i, (_, row, lower, upper) in enumerate(usable):
        if lower is not None and upper is not None:
            # A lower bound above an upper bound: each valid bound may do so with probability at most
            # 1 − c; many such bars point to a wrong estimator or accountant. Shown in red.
            violated = lower > upper
            ax.plot(
                [lower, upper],
                [i, i],
                color="tab:red" if violated else "tab:green",
                linewidth=6,
                alpha=0.35,
                solid_capstyle="butt",
                label="lower > upper (chance ≤ 1 − c each; many: check)" if violated else "region of privacy",
            )
        if lower is not None:
            ax.plot([lower], [i], "o", color="tab:red", label="ε lower (valid bound, joint confidence)")
        for name, value in row.epsilon_upper.items():
            if value is not None and math.isfinite(value):
                ax.plot(
                    [value],
                    [i],
                    markers.get(name, "s"),
                    color="tab:blue",
                    markerfacecolor="none",
                    label=f"ε upper ({name})",
                )
        if row.epsilon_star is not None and math.isfinite(row.epsilon_star):
            ax.plot(
                [row.epsilon_star],
                [i],
                "x",
                color="black",
                label="Epsilon* (estimate for this model, not a bound)",
            )
    ax.set_yticks(
        range(len(usable)), [f"{name}: {row.setting}" for name, row, _, _ in usable], fontsize="small"
    )
    ax.set_ylim(len(usable) - 0.5, -0.5)  # first row on top, no empty margin rows
    ax.set_xscale("symlog", linthresh=0.1)
    plotted = [v for _, row, lo, _ in usable for v in (lo, row.epsilon_star, *row.epsilon_upper.values())]
    finite = [float(v) for v in plotted if v is not None and math.isfinite(v)]
    ax.set_xlim(min(0.0, *finite), max(1.0, *finite) * 2.0)
    ax.set_xlabel("ε (symmetric-log scale)")
    fig.suptitle("Region of privacy: ε lower bound (attacks) to ε upper bounds (accountants)")
    ax.grid(True, axis="x", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    fig.legend(unique.values(), unique.keys(), fontsize="small", loc="outside lower center", ncol=4)
    return _to_png(fig)
