"""The region of privacy: for every setting, from the valid attack lower bound to the accountants' ε.

Erlingsson et al. §5.3 ("region of privacy"): the true privacy loss lies between the best valid
lower bound an attack proved and the tightest accountant's upper bound. Drawn for every setting of
every audit so they compare at a glance: one panel per audit, all on the same log ε axis, each with
its own ε tick labels (top and bottom when tall) and light vertical grid lines, so that no row is
far from an axis to read it off; many rows are laid out in two columns. Loose compositions (naive,
advanced) can be astronomically large (10^46 for long training), so any value beyond
:data:`CLIP_FACTOR` × the largest other value is drawn at that edge with a "clipped" marker and its
value written above it.
A lower bound of 0 cannot sit on a log axis: it is drawn at the axis' left edge with its own marker.
Epsilon* of the trained model (Negoescu et al.) is an estimate, drawn with its own marker, never as
a bound.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpaudit.report.figures import to_png
from dpaudit.results import SummaryRow

REGION_ROW_HEIGHT = 0.22  # inches per setting in the region-of-privacy overview
REGION_PANEL_HEIGHT = 0.75  # inches per audit's panel: its title and ε tick labels
REGION_FIXED_HEIGHT = 1.6  # inches for the figure's title and legend
REGION_WIDTH = 9.0  # inches, one column of panels
REGION_TWO_COLUMNS_WIDTH = 13.0  # inches, two columns of panels
REGION_TOP_AXIS_ROWS = 6  # panels with more rows than this repeat their ε tick labels on top
REGION_LABEL_CHARS = 32  # setting labels are wrapped at this many characters
REGION_TWO_COLUMNS_ROWS = 30  # more rows than this (over several audits): panels in two columns
#: Accountants whose ε may run off the scale (compositions of per-step ε): drawn clipped when they do.
LOOSE_ACCOUNTANTS = ("naive", "advanced")
#: Values beyond this factor times the largest other value are drawn clipped at that edge.
CLIP_FACTOR = 10.0
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
ZERO_LABEL = "ε lower = 0 (drawn at the left edge)"
CLIPPED_LABEL = "beyond the axis: clipped (value written above)"
VIOLATED_LABEL = "lower > upper (chance ≤ 1 − c each; many: check)"
STAR_LABEL = "Epsilon* (estimate for this model, not a bound)"


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None


def _region_rows(
    rows: Sequence[tuple[str, SummaryRow]],
) -> list[tuple[str, SummaryRow, float | None, str | None, float | None]]:
    """(audit, row, valid lower bound, tightest accountant, its ε) of every row with a finite value."""
    out = []
    for name, row in rows:
        uppers = {k: v for k, v in row.epsilon_upper.items() if _finite(v) is not None}
        accountant = min(uppers, key=lambda k: uppers[k]) if uppers else None
        lower = _finite(row.epsilon_lower)
        star = _finite(row.epsilon_star) is not None
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
            "estimate_epsilon_star": _finite(row.epsilon_star),
        }
        for name, row, lower, accountant, upper in _region_rows(rows)
    ]
    return pd.DataFrame(records, columns=list(REGION_COLUMNS))


def region_scale(rows: Sequence[tuple[str, SummaryRow]]) -> tuple[float, float]:
    """(left edge, clip edge) of the log axis: the left edge sits below the smallest positive value
    (zero lower bounds are drawn there); beyond the clip edge, :data:`CLIP_FACTOR` × the largest value
    of anything but the loose accountants, values are drawn clipped."""
    core: list[float] = []
    loose: list[float] = []
    for _, row in rows:
        core += [v for v in (_finite(row.epsilon_lower), _finite(row.epsilon_star)) if v is not None]
        for name, value in row.epsilon_upper.items():
            if (v := _finite(value)) is not None:
                (loose if name in LOOSE_ACCOUNTANTS else core).append(v)
    positive = [v for v in core + loose if v > 0]
    if not positive:
        return 0.01, 10.0
    top = max((v for v in core if v > 0), default=min(positive))
    return min(positive) / 3.0, CLIP_FACTOR * top


Usable = tuple[str, SummaryRow, float | None, float | None]  # (audit, row, lower bound, tightest upper)


def region_columns(panels: Sequence[tuple[str, int]]) -> list[list[str]]:
    """The audits of each column of panels, in order: one column, or two of about equal height
    (split where the taller is shortest) when there are several audits and more than
    :data:`REGION_TWO_COLUMNS_ROWS` rows."""
    names = [name for name, _ in panels]
    if len(panels) < 2 or sum(n for _, n in panels) <= REGION_TWO_COLUMNS_ROWS:
        return [names]
    heights = [n * REGION_ROW_HEIGHT + REGION_PANEL_HEIGHT for _, n in panels]
    split = min(range(1, len(panels)), key=lambda k: max(sum(heights[:k]), sum(heights[k:])))
    return [names[:split], names[split:]]


def _draw_row(ax: Axes, i: int, item: Usable, left: float, clip: float, markers: dict[str, str]) -> bool:
    """Row ``i`` of a panel: the bar from lower to tightest upper bound, every accountant, Epsilon*;
    whether a value was clipped (its text is written above the row)."""
    _, row, lower, upper = item

    def at(value: float) -> float:
        return min(max(value, left), clip)

    if lower is not None and upper is not None:
        # A lower bound above an upper bound: each valid bound may do so with probability at most
        # 1 − c; many such bars point to a wrong estimator or accountant. Shown in red.
        violated = lower > upper
        label = VIOLATED_LABEL if violated else "region of privacy"
        ax.plot([at(lower), at(upper)], [i, i], color="tab:red" if violated else "tab:green", linewidth=6,
                alpha=0.35, solid_capstyle="butt", label=label)  # fmt: skip
    if lower is not None and lower > 0:
        ax.plot([lower], [i], "o", color="tab:red", label="ε lower (valid bound, joint confidence)")
    elif lower is not None:
        ax.plot([left], [i], "|", color="tab:red", markersize=10, markeredgewidth=2, label=ZERO_LABEL)
    clipped = []
    for name, value in row.epsilon_upper.items():
        if (v := _finite(value)) is None:
            continue
        if v > clip:
            clipped.append(f"{name} {v:.2g}")
            continue
        ax.plot([at(v)], [i], markers.get(name, "s"), color="tab:blue", markerfacecolor="none",
                label=f"ε upper ({name})")  # fmt: skip
    if clipped:
        ax.plot([clip], [i], ">", color="tab:purple", label=CLIPPED_LABEL)
        # Just above the row's markers and below the next row's (rows are 16 pt apart).
        ax.annotate("; ".join(clipped), (clip, i), xytext=(-6, 3), textcoords="offset points",
                    ha="right", va="bottom", fontsize="x-small", color="tab:purple")  # fmt: skip
    if (star := _finite(row.epsilon_star)) is not None and star > 0:
        ax.plot([at(star)], [i], "x", color="black", label=STAR_LABEL)
    return bool(clipped)


def region_of_privacy_figure(rows: Sequence[tuple[str, SummaryRow]]) -> Figure | None:
    """The region-of-privacy figure (see the module's text), or ``None`` when no row has a finite value.

    One panel per audit, its settings as rows, all on the same log ε axis; every panel has its own
    ε tick labels below (and above, when it has more than :data:`REGION_TOP_AXIS_ROWS` rows) and
    light vertical grid lines, so every row's values can be read off an axis close by. Many rows go
    in two columns of panels (:func:`region_columns`). The lower bound drawn is only ever the row's
    valid bound (:func:`region_of_privacy_data`).
    """
    usable: list[Usable] = [(name, row, lower, upper) for name, row, lower, _, upper in _region_rows(rows)]
    if not usable:
        return None
    left, clip = region_scale([(name, row) for name, row, _, _ in usable])
    panels: dict[str, list[Usable]] = {}
    for item in usable:
        panels.setdefault(item[0], []).append(item)
    columns = region_columns([(name, len(items)) for name, items in panels.items()])
    heights = [sum(REGION_ROW_HEIGHT * len(panels[a]) + REGION_PANEL_HEIGHT for a in c) for c in columns]
    width = REGION_WIDTH if len(columns) == 1 else REGION_TWO_COLUMNS_WIDTH
    fig = Figure(figsize=(width, REGION_FIXED_HEIGHT + max(heights)), layout="constrained")
    FigureCanvasAgg(fig)
    accountants = sorted({k for _, row, _, _ in usable for k in row.epsilon_upper})
    markers = dict(zip(accountants, "s^vP*Xhd", strict=False))
    for sub, audits, height in zip(fig.subfigures(1, len(columns), squeeze=False)[0], columns, heights,
                                   strict=True):  # fmt: skip
        filler = (max(heights) - height) / REGION_ROW_HEIGHT  # keeps rows equally tall in both columns
        ratios = [len(panels[a]) for a in audits] + ([filler] if filler > 0.5 else [])
        axes = sub.subplots(len(ratios), 1, squeeze=False, gridspec_kw={"height_ratios": ratios})[:, 0]
        for ax in axes[len(audits) :]:
            ax.set_visible(False)
        for ax, audit in zip(axes, audits, strict=False):
            clipped = [_draw_row(ax, i, item, left, clip, markers) for i, item in enumerate(panels[audit])]
            ax.set_title(audit, loc="left", fontsize="medium", fontweight="bold")
            labels = [textwrap.fill(item[1].setting, REGION_LABEL_CHARS) for item in panels[audit]]
            ax.set_yticks(range(len(labels)), labels, fontsize="small")
            # First row on top, no empty margin rows but room for a clipped value's text above the first.
            ax.set_ylim(len(panels[audit]) - 0.5, -0.85 if clipped[0] else -0.5)
            ax.set_xscale("log")
            ax.set_xlim(left / 1.5, clip * 1.5)
            ax.tick_params(axis="x", which="both", top=True, labelbottom=True,
                           labeltop=len(panels[audit]) > REGION_TOP_AXIS_ROWS)  # fmt: skip
            ax.grid(True, axis="x", which="major", alpha=0.4)
            ax.grid(True, axis="x", which="minor", alpha=0.12)
        axes[len(audits) - 1].set_xlabel("ε (log scale)")
    fig.suptitle(
        "Region of privacy: ε lower bound (attacks) to ε upper bounds (accountants)\n"
        f"one panel per audit, all on the same ε axis; beyond {clip:.3g} = {CLIP_FACTOR:g}× the largest "
        "tight value: clipped",
        fontsize="large",
    )
    unique: dict[str, Artist] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            unique.setdefault(label, handle)
    fig.legend(unique.values(), unique.keys(), fontsize="small", loc="outside lower center", ncol=3)
    return fig


def region_of_privacy_png(rows: Sequence[tuple[str, SummaryRow]]) -> bytes | None:
    """:func:`region_of_privacy_figure` as PNG bytes (None when there is nothing to draw)."""
    fig = region_of_privacy_figure(rows)
    return None if fig is None else to_png(fig)
