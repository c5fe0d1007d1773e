"""The region of privacy: for every setting, from the valid attack lower bound to the accountants' ε.

Erlingsson et al. §5.3 ("region of privacy"): the true privacy loss lies between the best valid
lower bound an attack proved and the tightest accountant's upper bound. Drawn for every setting of
every audit so they compare at a glance, on a log axis. Loose compositions (naive, advanced) can be
astronomically large (10^46 for long training), so any value beyond :data:`CLIP_FACTOR` × the
largest other value is drawn at that edge with a "clipped" marker and its value written beside it.
A lower bound of 0 cannot sit on a log axis: it is drawn at the axis' left edge with its own marker.
Epsilon* of the trained model (Negoescu et al.) is an estimate, drawn with its own marker, never as
a bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpaudit.report.figures import to_png
from dpaudit.results import SummaryRow

REGION_ROW_HEIGHT = 0.26  # inches per setting in the region-of-privacy overview
REGION_FIXED_HEIGHT = 1.8  # inches for its title, x axis and legend
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
CLIPPED_LABEL = "beyond the axis: clipped (value written beside)"
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


def region_of_privacy_figure(rows: Sequence[tuple[str, SummaryRow]]) -> Figure | None:
    """The region-of-privacy figure (see the module's text), or ``None`` when no row has a finite value.

    The lower bound drawn is only ever the row's valid bound (:func:`region_of_privacy_data`).
    """
    usable = [(name, row, lower, upper) for name, row, lower, _, upper in _region_rows(rows)]
    if not usable:
        return None
    left, clip = region_scale([(name, row) for name, row, _, _ in usable])
    fig = Figure(figsize=(9.0, REGION_FIXED_HEIGHT + REGION_ROW_HEIGHT * len(usable)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    accountants = sorted({k for _, row, _, _ in usable for k in row.epsilon_upper})
    markers = dict(zip(accountants, "s^vP*Xhd", strict=False))

    def at(value: float) -> float:
        return min(max(value, left), clip)

    for i, (_, row, lower, upper) in enumerate(usable):
        if lower is not None and upper is not None:
            # A lower bound above an upper bound: each valid bound may do so with probability at most
            # 1 − c; many such bars point to a wrong estimator or accountant. Shown in red.
            violated = lower > upper
            ax.plot(
                [at(lower), at(upper)],
                [i, i],
                color="tab:red" if violated else "tab:green",
                linewidth=6,
                alpha=0.35,
                solid_capstyle="butt",
                label="lower > upper (chance ≤ 1 − c each; many: check)" if violated else "region of privacy",
            )
        if lower is not None and lower > 0:
            ax.plot([lower], [i], "o", color="tab:red", label="ε lower (valid bound, joint confidence)")
        elif lower is not None:
            ax.plot([left], [i], "|", color="tab:red", markersize=12, markeredgewidth=2, label=ZERO_LABEL)
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
            ax.annotate("; ".join(clipped), (clip, i), xytext=(-8, 4), textcoords="offset points",
                        ha="right", va="bottom", fontsize="x-small", color="tab:purple")  # fmt: skip
        if (star := _finite(row.epsilon_star)) is not None and star > 0:
            ax.plot([at(star)], [i], "x", color="black", label=STAR_LABEL)
    ax.set_yticks(
        range(len(usable)), [f"{name}: {row.setting}" for name, row, _, _ in usable], fontsize="small"
    )
    ax.set_ylim(len(usable) - 0.5, -0.5)  # first row on top, no empty margin rows
    ax.set_xscale("log")
    ax.set_xlim(left / 1.5, clip * 1.5)
    ax.set_xlabel(f"ε (log scale; beyond {clip:.3g} = {CLIP_FACTOR:g}× the largest tight value: clipped)")
    fig.suptitle("Region of privacy: ε lower bound (attacks) to ε upper bounds (accountants)")
    ax.grid(True, axis="x", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    fig.legend(unique.values(), unique.keys(), fontsize="small", loc="outside lower center", ncol=3)
    return fig


def region_of_privacy_png(rows: Sequence[tuple[str, SummaryRow]]) -> bytes | None:
    """:func:`region_of_privacy_figure` as PNG bytes (None when there is nothing to draw)."""
    fig = region_of_privacy_figure(rows)
    return None if fig is None else to_png(fig)
