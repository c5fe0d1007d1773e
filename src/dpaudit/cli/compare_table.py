"""The ``dpaudit compare`` table: headlines read from a summary entry, and a text table that fits.

Pure functions on plain data (no DVC, no files), so the layout is tested on constructed experiments.
:func:`headline` turns one audit's entry of ``metrics/summary.json`` into the four numbers of the
report's summary (ε proven with its level, ε promised, their ratio, utility); it reads the utility
both as ``{"utility": {measure: value}}`` and as ``"utility": value`` with ``"utility_measure"``.
:func:`changed_audits` keeps the audits whose headline differs between experiments as displayed,
those whose verdict (``caught``: the audit flagged the training's claim) changed first, and
:func:`render` opens with one line per changed verdict, then lays out one row per experiment in at
most :data:`WIDTH` columns: the changed parameters (wrapped to two lines, then ``+N``) and as many
audits as fit, naming the ones left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dpaudit.precision import Direction, measured

#: The text table never gets wider than this.
WIDTH = 100
#: Accountants in order of preference for "ε promised" (the report's tightest is PLD where computed).
ACCOUNTANTS = ("pld", "rdp")
#: Column labels of an audit's group, the most readable set that shows the most audits.
LABELS = (
    ("proven", "promised", "ratio", "utility"),
    ("proven", "promised", "ratio", "util."),
    ("ε≥", "ε≤", "ratio", "util."),
)
NAME_LABEL, PARAMS_LABEL = "experiment", "changed params"
#: Longest experiment name shown; a parameter cell's most lines; the narrowest parameter column.
NAME_MAX, PARAM_LINES, PARAMS_MIN = 16, 2, 14
#: Parameter tokens up to this long are never cut if the table can make room by leaving out audits.
TOKEN_KEEP = 30
GAP = "  "


# ------------------------------------------------------------------------------------------ numbers


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(float(value)) else None


def number(value: float | None, direction: Direction = "nearest") -> str:
    """A headline number in at most 3 significant digits ("–" when missing, "∞" for the 1e308 stand-in);
    a bound rounded outward (``down`` for a lower bound, ``up`` for an upper one), as the report shows it."""
    if value is None:
        return "–"
    if abs(value) >= 1e300:
        return "∞" if value > 0 else "−∞"
    if abs(value) >= 1000:
        return f"{value:.0f}" if abs(value) < 1e6 else f"{value:.2e}"
    value = measured(value, direction)
    return f"{value:#.3g}".rstrip(".") if value else "0"


def percent(level: float) -> str:
    """0.95 → "95%"."""
    return f"{round(100 * level, 6):g}%"


# ---------------------------------------------------------------------------------------- headlines


def utility_of(entry: Mapping[str, Any]) -> tuple[str | None, float | None]:
    """(measure, value) of an audit's utility: ``{"utility": {name: value}}`` or a flat ``utility``
    number with ``utility_measure`` beside it (measure None when unstated)."""
    utility = entry.get("utility")
    if isinstance(utility, Mapping):
        for name, value in utility.items():
            if _finite(value) is not None:
                return str(name), _finite(value)
        return None, None
    measure = entry.get("utility_measure")
    return (str(measure) if measure else None), _finite(utility)


def promised(epsilon_upper: Any) -> tuple[str | None, float | None]:
    """(accountant, ε) of "ε promised": PLD where present, else RDP, else the smallest other."""
    if _finite(epsilon_upper) is not None:
        return None, _finite(epsilon_upper)
    if not isinstance(epsilon_upper, Mapping):
        return None, None
    finite = {str(k): v for k, value in epsilon_upper.items() if (v := _finite(value)) is not None}
    for name in (*ACCOUNTANTS, *sorted(finite, key=lambda k: finite[k])):
        if name in finite:
            return name, finite[name]
    return None, None


def caught_of(entry: Mapping[str, Any] | None) -> bool | None:
    """The audit's verdict from its summary entry: ``caught`` (1: a violation proven or the code does
    not match its declaration; 0: nothing found), None where the audit gives no verdict."""
    value = _finite((entry or {}).get("caught"))
    return None if value is None else value > 0


def headline(entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """The four headline numbers of one audit's summary entry, with what qualifies them.

    ``level`` is None where unstated (and where the summary writes 0, its mark of "no counted bound");
    ``ratio`` is proven / promised, as in the report's summary.
    """
    entry = entry or {}
    lower = _finite(entry.get("epsilon_lower"))
    level = _finite(entry.get("epsilon_lower_level"))
    accountant, upper = promised(entry.get("epsilon_upper"))
    measure, utility = utility_of(entry)
    ratio = lower / upper if lower is not None and upper is not None and 0 < upper < 1e300 else None
    return {
        "epsilon_lower": lower,
        "level": level if level else None,
        "assumes": entry.get("epsilon_lower_assumes"),
        "epsilon_upper": upper,
        "accountant": accountant,
        "ratio": ratio,
        "utility": utility,
        "utility_measure": measure,
        "caught": caught_of(entry),
        "epsilon_claimed": _finite(entry.get("epsilon_claimed")),
    }


def cells(head: Mapping[str, Any] | None, level_in_cell: bool) -> tuple[str, str, str, str]:
    """The four cells of a headline; the level joins the proven ε ("1.44@95%") when asked to."""
    if not head:
        return ("–", "–", "–", "–")
    proven = number(head["epsilon_lower"], "down")
    if level_in_cell and head["epsilon_lower"] is not None and head["level"] is not None:
        proven += "@" + percent(head["level"])
    return (proven, number(head["epsilon_upper"], "up"), number(head["ratio"]), number(head["utility"]))


def verdict_changed(summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Audits (in first-seen order) whose verdict (``caught``) differs between the summaries."""
    audits = list(dict.fromkeys(a for s in summaries for a, e in s.items() if isinstance(e, Mapping)))
    return [a for a in audits if len({caught_of(s.get(a)) for s in summaries} - {None}) > 1]


def changed_audits(summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Audits whose displayed headline or verdict differs between the summaries: those whose verdict
    changed first, then the others, each in first-seen order."""
    audits = list(dict.fromkeys(a for s in summaries for a, e in s.items() if isinstance(e, Mapping)))
    changed = []
    for audit in audits:
        shown = {cells(headline(s[audit]) if audit in s else None, True) for s in summaries}
        if len(shown) > 1:
            changed.append(audit)
    flipped = verdict_changed(summaries)
    return flipped + [a for a in changed if a not in flipped]


def verdict_lines(result: Mapping[str, Any], width: int = WIDTH) -> list[str]:
    """One line per audit whose verdict changed: in which experiments it caught the training's claim
    (with the claimed ε) and in which it found nothing."""
    rows = result["experiments"]
    out = []
    for audit in result["audits"]:
        heads = [(r["name"], r["headlines"].get(audit)) for r in rows]
        caught = [n for n, h in heads if h and h.get("caught")]
        clean = [n for n, h in heads if h and h.get("caught") is False]
        if not caught or not clean:
            continue
        claims = {h["epsilon_claimed"] for _, h in heads if h and h.get("epsilon_claimed") is not None}
        claim = f" (claimed ε {number(claims.pop())})" if len(claims) == 1 else ""
        found, nothing = ", ".join(caught), ", ".join(clean)
        text = f"VERDICT CHANGED {audit}{claim}: caught in {found}; not in {nothing}"
        out.append(fit(text, width))
    return out


# --------------------------------------------------------------------------------------- parameters


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as ``{"a.b.c": leaf}``; lists are leaves."""
    if not isinstance(tree, Mapping) or (prefix and not tree):
        return {prefix: tree} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def short_keys(keys: Iterable[str]) -> dict[str, str]:
    """Each dotted key shortened to its last components, as few as keep it apart from the others."""
    keys = list(dict.fromkeys(keys))
    parts = {key: key.split(".") for key in keys}
    out = {}
    for key in keys:
        for n in range(1, len(parts[key]) + 1):
            tail = parts[key][-n:]
            if not any(other != key and parts[other][-n:] == tail for other in keys):
                break
        out[key] = ".".join(tail)
    return out


def value_text(value: Any) -> str:
    """A parameter value as ``-S`` would take it: ``[0.9,0.99]``, ``null``, ``true``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return "[" + ",".join(value_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{value_text(v)}" for k, v in value.items()) + "}"
    return str(value)


_ABSENT = object()


def param_tokens(row: Mapping[str, Any], base: Mapping[str, Any], names: Mapping[str, str]) -> list[str]:
    """``key=value`` of each parameter where the row differs from the baseline (``key=(removed)``)."""
    tokens = []
    for key in dict.fromkeys([*base, *row]):
        mine, theirs = row.get(key, _ABSENT), base.get(key, _ABSENT)
        if mine != theirs:
            tokens.append(f"{names.get(key, key)}=" + ("(removed)" if mine is _ABSENT else value_text(mine)))
    return tokens


# ------------------------------------------------------------------------------------------- layout


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, ending in "…" where cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def wrap(tokens: Sequence[str], width: int, lines: int = PARAM_LINES) -> list[str]:
    """Tokens joined by spaces into at most ``lines`` lines of ``width``; the rest as ``+N``."""
    out: list[str] = []
    for i, token in enumerate(tokens):
        token = fit(token, width)
        if out and len(out[-1]) + 1 + len(token) <= width:
            out[-1] += " " + token
        elif len(out) < lines:
            out.append(token)
        else:
            rest = len(tokens) - i
            while len(out[-1]) + len(f" +{rest}") > width and " " in out[-1]:
                out[-1], _ = out[-1].rsplit(" ", 1)
                rest += 1
            out[-1] = fit(out[-1], width - len(f" +{rest}")) + f" +{rest}"
            break
    return out or [""]


def _group(audit: str, heads: Sequence[Any], labels: Sequence[str], level_in_cell: bool) -> dict[str, Any]:
    rows = [cells(h, level_in_cell) for h in heads]
    widths = [max(len(label), *(len(r[i]) for r in rows)) for i, label in enumerate(labels)]
    return {"audit": audit, "labels": labels, "rows": rows, "widths": widths, "width": sum(widths) + 6}


def _legend(
    heads: Sequence[Any], audits: Sequence[str], labels: Sequence[str], level_in_cell: bool, width: int
) -> list[str]:
    """What the columns hold (the level, the accountant, the utility measure): one line, or two where
    the utility measures differ between audits and make it too long."""
    say = [("" if label in LABELS[0] else f"{label} = ") for label in labels]
    levels = sorted({h["level"] for h in heads if h and h["level"] is not None and h["epsilon_lower"]})
    level = " at the level after @" if level_in_cell else f" at {percent(levels[0])}" if levels else ""
    used = [a for a in ACCOUNTANTS if any(h and h["accountant"] == a for h in heads)]
    used += sorted({h["accountant"] for h in heads if h and h["accountant"] not in (*ACCOUNTANTS, None)})
    names = " or ".join(a.upper() if a in ACCOUNTANTS else a for a in used) or "an accountant"
    parts = [f"{say[0]}ε proven{level}", f"{say[1]}ε promised by {names}", f"ratio = {labels[0]}/{labels[1]}"]
    measures: dict[str, dict[str, None]] = {}
    for audit, head in zip(audits, heads, strict=True):
        if head and head["utility"] is not None:
            measures.setdefault(head["utility_measure"] or "not named", {})[audit] = None
    if not measures:
        return [fit(" · ".join(parts), width)]
    common = max(measures, key=lambda m: len(measures[m]))
    others = [f"{m} for {', '.join(a)}" for m, a in measures.items() if m != common]
    utility = "; ".join([f"utility: {common}", *others])
    if len(" · ".join([*parts, utility])) <= width:
        return [" · ".join([*parts, utility])]
    return [fit(" · ".join(parts), width), fit(utility, width)]


def render(result: Mapping[str, Any], width: int = WIDTH) -> list[str]:
    """The text table of a ``compare`` result: never wider than ``width``; see the module docstring."""
    rows = result["experiments"]
    audits = list(result["audits"])
    base = next((r["params"] for r in rows if r["kind"] == "baseline"), {})
    keys = short_keys(k for r in rows for k in (*r["params"], *base))
    tokens = [
        ["(baseline)"] if r["kind"] == "baseline" else param_tokens(r["params"], base, keys) or ["(none)"]
        for r in rows
    ]
    names = [fit(r["name"], NAME_MAX) for r in rows]
    name_w = max(len(NAME_LABEL), *map(len, names))
    params_min = max(PARAMS_MIN, min(TOKEN_KEEP, max(len(t) for ts in tokens for t in ts)))
    heads = {a: [r["headlines"].get(a) for r in rows] for a in audits}
    level_in_cell = len({h["level"] for a in audits for h in heads[a] if h and h["epsilon_lower"]}) > 1

    def layout(labels: Sequence[str]) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = []
        for audit in audits:
            group = _group(audit, heads[audit], labels, level_in_cell)
            used = name_w + sum(len(GAP) + g["width"] for g in [*groups, group]) + len(GAP)
            if groups and width - used < params_min:
                break
            groups.append(group)
        return groups

    options = [layout(labels) for labels in LABELS]
    groups = max(options, key=len)  # the first (most readable) of those that show the most audits
    labels = groups[0]["labels"] if groups else LABELS[0]
    room = width - name_w - len(GAP) - sum(len(GAP) + g["width"] for g in groups)
    wrapped = [wrap(ts, max(room, 1)) for ts in tokens]
    params_w = max(len(PARAMS_LABEL), *(len(line) for lines in wrapped for line in lines))
    params_w = min(params_w, max(room, 1))
    left = name_w + len(GAP) + params_w

    def line(name: str, params: str, group_cells: Sequence[str]) -> str:
        text = name.ljust(name_w) + GAP + fit(params, params_w).ljust(params_w) + "".join(group_cells)
        return text.rstrip()[:width]

    out = verdict_lines(result, width)
    if groups:
        names_line = "".join(GAP + fit(g["audit"], g["width"]).ljust(g["width"]) for g in groups)
        out.append((" " * left + names_line)[:width])
    labels_cells = [
        GAP + GAP.join(label.rjust(w) for label, w in zip(g["labels"], g["widths"], strict=True))
        for g in groups
    ]
    out.append(line(NAME_LABEL, PARAMS_LABEL, labels_cells))
    for i, name in enumerate(names):
        row_cells = [
            GAP + GAP.join(c.rjust(w) for c, w in zip(g["rows"][i], g["widths"], strict=True)) for g in groups
        ]
        out.append(line(name, wrapped[i][0], row_cells))
        out.extend(line("", more, []) for more in wrapped[i][1:])
    if groups:
        shown = [g["audit"] for g in groups]
        flat = [h for a in shown for h in heads[a]]
        owners = [a for a in shown for _ in heads[a]]
        out.extend(_legend(flat, owners, labels, level_in_cell, width))
    else:
        out.append("no headline differs between these experiments")
    hidden = audits[len(groups) :]
    if hidden:
        head, tail = f"+{len(hidden)} more audit{'s' * (len(hidden) > 1)}: ", " (--audit NAME picks)"
        out.append(head + fit(", ".join(hidden), width - len(head) - len(tail)) + tail)
    for note in result.get("notes", []):
        out.append(fit(note, width))
    return [text.rstrip() for text in out]
