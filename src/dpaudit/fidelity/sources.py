"""Readers that turn a committed result into dpaudit's number for one paper claim.

Each reader is a small function of :class:`~dpaudit.fidelity.evidence.Evidence` returning an
:class:`~dpaudit.fidelity.evidence.Observed` (or None when the result is not there). They are built
by the constructors below so the claims in :mod:`dpaudit.fidelity.claims` read as data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from statistics import fmean

from dpaudit.fidelity.evidence import Evidence, Observed

__all__ = [
    "Source",
    "audit_best",
    "closed_form",
    "audit_mean",
    "audit_value",
    "profile_value",
    "ratio_of_audit_values",
    "share_of_defences",
]

Source = Callable[[Evidence], Observed | None]


def _interval(group: dict, key: str, scale: float) -> tuple[float | None, float | None]:
    low, high = group.get(f"{key}_low"), group.get(f"{key}_high")
    return (None if low is None else low / scale, None if high is None else high / scale)


def audit_value(
    audit: str, group: str, key: str, estimator: str, *, same: bool, setting: str, scale: float = 1.0
) -> Source:
    """``results/<audit>.json[group][key] / scale`` (with its ``_low``/``_high`` when present)."""

    def read(evidence: Evidence) -> Observed | None:
        record = evidence.group(audit, group)
        if record is None or record.get(key) is None:
            return None
        low, high = _interval(record, key, scale)
        return Observed(
            record[key] / scale, estimator, same, setting, f"results/{audit}.json: {group} {key}", low, high
        )

    return read


def audit_best(
    audit: str,
    groups: Iterable[str] | None,
    key: str,
    estimator: str,
    *,
    same: bool,
    setting: str,
    scale: float = 1.0,
) -> Source:
    """The largest ``key`` over ``groups`` of one audit (e.g. a threat model's best distinguisher);
    ``groups`` None: over every group that has it (e.g. Epsilon* of any model)."""
    names = None if groups is None else tuple(groups)

    def read(evidence: Evidence) -> Observed | None:
        data = evidence.audit(audit) or {}
        found = [(g, data.get(g)) for g in (data if names is None else names)]
        found = [(g, r) for g, r in found if isinstance(r, dict) and r.get(key) is not None]
        if not found:
            return None
        group, record = max(found, key=lambda item: item[1][key])
        return Observed(record[key] / scale, estimator, same, setting, f"results/{audit}.json: {group} {key}")

    return read


def audit_mean(audit: str, prefix: str, key: str, estimator: str, *, same: bool, setting: str) -> Source:
    """The mean of ``key`` over the groups of one audit whose name starts with ``prefix`` (repeats).

    A point value: the repeats' range is no confidence interval, so none is given.
    """

    def read(evidence: Evidence) -> Observed | None:
        data = evidence.audit(audit) or {}
        groups = [r for g, r in data.items() if g.startswith(prefix) and isinstance(r, dict)]
        values = [r[key] for r in groups if key in r]
        if not values:
            return None
        return Observed(
            fmean(values), estimator, same, setting,
            f"results/{audit}.json: mean of {key} over {len(values)} groups {prefix}*",
        )  # fmt: skip

    return read


def ratio_of_audit_values(
    audit: str, numerators: Iterable[str], denominator: str, key: str, estimator: str, *, setting: str
) -> Source:
    """Best ``key`` over the numerator groups divided by the denominator group's (e.g. canary / population).

    The interval is the ratio of the outer limits (numerator low / denominator high, numerator high /
    denominator low): it holds whenever both limits do.
    """
    numerators = tuple(numerators)

    def read(evidence: Evidence) -> Observed | None:
        base = evidence.group(audit, denominator)
        tops = [(g, evidence.group(audit, g)) for g in numerators]
        tops = [(g, r) for g, r in tops if r is not None and r.get(key) is not None]
        if base is None or not base.get(key) or not tops:
            return None
        group, top = max(tops, key=lambda item: item[1][key])
        low = top.get(f"{key}_low", top[key]) / base.get(f"{key}_high", base[key])
        base_low = base.get(f"{key}_low", base[key])
        high = top.get(f"{key}_high", top[key]) / base_low if base_low > 0 else None
        source = f"results/{audit}.json: {group} / {denominator} {key}"
        return Observed(top[key] / base[key], estimator, False, setting, source, low, high)

    return read


def profile_value(
    profile: str, key: str, *, same: bool, scale: float = 1.0, times: str | None = None
) -> Source:
    """A number of ``reproductions/<profile>.json`` divided by ``scale`` (and multiplied by the
    profile's number ``times``, e.g. its ε_PLD to turn a ratio to ε_PLD into ε); its estimator and
    setting come from the file."""

    def read(evidence: Evidence) -> Observed | None:
        result = evidence.profile(profile)
        if result is None or key not in result.numbers or (times and times not in result.numbers):
            return None
        factor = (result.numbers[times].value if times else 1.0) / scale
        m = result.numbers[key]
        return Observed(
            m.value * factor, m.estimator, same, result.setting, f"reproductions/{profile}.json: {key}",
            None if m.low is None else m.low * factor, None if m.high is None else m.high * factor,
        )  # fmt: skip

    return read


def closed_form(compute: Callable[[], float], estimator: str, *, setting: str, source: str) -> Source:
    """A number dpaudit computes from its own library (e.g. a Clopper–Pearson cap), not read from a file."""

    def read(evidence: Evidence) -> Observed | None:
        return Observed(float(compute()), estimator, True, setting, source)

    return read


def share_of_defences(
    audit: str, holds: Callable[[dict], bool], estimator: str, *, setting: str, describe: str
) -> Source:
    """The share of the published heuristic defences of ``results/<audit>.json["heuristics"]`` (one
    entry per defence) for which ``holds`` is true; ``describe`` names the keys it reads."""

    def read(evidence: Evidence) -> Observed | None:
        rows = evidence.group(audit, "heuristics")
        if not rows:
            return None
        share = fmean(1.0 if holds(row) else 0.0 for row in rows.values())
        source = f"results/{audit}.json: heuristics ({', '.join(sorted(rows))}) {describe}"
        return Observed(share, estimator, False, setting, source)

    return read
