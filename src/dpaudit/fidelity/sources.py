"""Readers that turn a committed result into dpaudit's number for one paper claim.

Each reader is a small function of :class:`~dpaudit.fidelity.evidence.Evidence` returning an
:class:`~dpaudit.fidelity.evidence.Observed` (or None when the result is not there). They are built
by the constructors below so the claims in :mod:`dpaudit.fidelity.claims` read as data.

Every constructor takes the row's ``role`` (:data:`~dpaudit.fidelity.evidence.ROLES`): ``"paper"``
for the paper's own estimator in the paper's setting or the closest one the machine allows (the first
such row present decides the claim), ``"also"`` for the paper's estimator in another setting (its own
verdict, never counted), ``"beyond"`` for another estimator or a modified protocol (shown as "beyond
the paper"). A number with limits names what they are (``interval``, one of
:data:`~dpaudit.fidelity.evidence.INTERVALS`): only a confidence interval may put the paper's number
"inside" dpaudit's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from statistics import fmean

from dpaudit.fidelity.evidence import Evidence, Observed, Role

__all__ = [
    "Source",
    "audit_best",
    "audit_mean",
    "audit_value",
    "closed_form",
    "computed",
    "profile_difference",
    "profile_value",
    "ratio_of_audit_values",
    "share_of_defences",
]

Source = Callable[[Evidence], Observed | None]


def _ci(group: dict, key: str) -> str:
    level = group.get(f"{key}_level")
    return f"{100 * float(level):g} % CI" if level is not None else "95 % CI"


def audit_value(
    audit: str,
    group: str,
    key: str,
    estimator: str,
    *,
    role: Role,
    setting: str,
    scale: float = 1.0,
    trials: int | None = None,
) -> Source:
    """``results/<audit>.json[group][key] / scale``, with its ``_low``/``_high`` (the bounds stage's
    two-sided confidence interval at ``_level``) when present."""

    def read(evidence: Evidence) -> Observed | None:
        record = evidence.group(audit, group)
        if record is None or record.get(key) is None:
            return None
        low, high = record.get(f"{key}_low"), record.get(f"{key}_high")
        interval = _ci(record, key) if low is not None and high is not None else ""
        return Observed(
            record[key] / scale,
            estimator,
            role != "beyond",
            setting,
            f"results/{audit}.json: {group} {key}",
            None if low is None else low / scale,
            None if high is None else high / scale,
            interval=interval,
            role=role,
            trials=trials,
        )

    return read


def audit_best(
    audit: str,
    groups: Iterable[str] | None,
    key: str,
    estimator: str,
    *,
    role: Role,
    setting: str,
    scale: float = 1.0,
    trials: int | None = None,
) -> Source:
    """The largest ``key`` over ``groups`` of one audit (e.g. a threat model's best distinguisher);
    ``groups`` None: over every group that has it (e.g. Epsilon* of any model). A point value."""
    names = None if groups is None else tuple(groups)

    def read(evidence: Evidence) -> Observed | None:
        data = evidence.audit(audit) or {}
        found = [(g, data.get(g)) for g in (data if names is None else names)]
        found = [(g, r) for g, r in found if isinstance(r, dict) and r.get(key) is not None]
        if not found:
            return None
        group, record = max(found, key=lambda item: item[1][key])
        return Observed(
            record[key] / scale,
            estimator,
            role != "beyond",
            setting,
            f"results/{audit}.json: {group} {key}",
            role=role,
            trials=trials,
        )

    return read


def audit_mean(audit: str, prefix: str, key: str, estimator: str, *, role: Role, setting: str) -> Source:
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
            fmean(values),
            estimator,
            role != "beyond",
            setting,
            f"results/{audit}.json: mean of {key} over {len(values)} groups {prefix}*",
            role=role,
        )

    return read


def ratio_of_audit_values(
    audit: str,
    numerators: Iterable[str],
    denominator: str,
    key: str,
    estimator: str,
    *,
    role: Role,
    setting: str,
) -> Source:
    """Best ``key`` over the numerator groups divided by the denominator group's (e.g. canary / population).

    The interval is the ratio of the outer limits (numerator low / denominator high, numerator high /
    denominator low): it holds whenever both limits do, a conservative 90 % interval from two 95 % ones.
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
        return Observed(
            top[key] / base[key],
            estimator,
            role != "beyond",
            setting,
            source,
            low,
            high,
            interval="≥ 90 % CI (ratio of 95 % limits)",
            role=role,
        )

    return read


def profile_value(
    profile: str,
    key: str,
    *,
    role: Role,
    scale: float = 1.0,
    times: str | None = None,
    interval: str = "",
    needed: str | None = None,
    trials: int | None = None,
    estimator: str | None = None,
) -> Source:
    """A number of ``reproductions/<profile>.json`` divided by ``scale`` (and multiplied by the
    profile's number ``times``, e.g. its ε_PLD to turn a ratio to ε_PLD into ε); its estimator and
    setting come from the file. ``interval`` names what the number's low/high are (required when it
    has them); ``needed`` a key of the same file holding the trial count per world the paper's number
    would need (:mod:`dpaudit.fidelity.power`)."""

    def read(evidence: Evidence) -> Observed | None:
        result = evidence.profile(profile)
        if result is None or key not in result.numbers or (times and times not in result.numbers):
            return None
        factor = (result.numbers[times].value if times else 1.0) / scale
        m = result.numbers[key]
        if (m.low is not None or m.high is not None) and not interval:
            raise ValueError(f"reproductions/{profile}.json: {key} has limits; name their kind (interval=)")
        count = None
        if needed is not None and needed in result.numbers:
            value = result.numbers[needed].value
            count = math.inf if value < 0 or not math.isfinite(value) else int(value)  # −1: no count would
        return Observed(
            m.value * factor,
            estimator or m.estimator,
            role != "beyond",
            result.setting,
            f"reproductions/{profile}.json: {key}",
            None if m.low is None else m.low * factor,
            None if m.high is None else m.high * factor,
            interval=interval if m.low is not None or m.high is not None else "",
            needed=count,
            role=role,
            trials=trials if trials is not None else m.n,
        )

    return read


def profile_difference(
    profile: str, minuend: str, subtrahend: str, estimator: str, *, role: Role, scale: float = 1.0
) -> Source:
    """``(numbers[minuend] − numbers[subtrahend]) / scale`` of one profile file (a point value)."""

    def read(evidence: Evidence) -> Observed | None:
        result = evidence.profile(profile)
        if result is None or minuend not in result.numbers or subtrahend not in result.numbers:
            return None
        value = (result.numbers[minuend].value - result.numbers[subtrahend].value) / scale
        source = f"reproductions/{profile}.json: {minuend} − {subtrahend}"
        return Observed(value, estimator, role != "beyond", result.setting, source, role=role)

    return read


def closed_form(
    compute: Callable[[], float], estimator: str, *, setting: str, source: str, role: Role = "paper"
) -> Source:
    """A number dpaudit computes from its own library (e.g. a Clopper–Pearson cap), not read from a file."""

    def read(evidence: Evidence) -> Observed | None:
        return Observed(float(compute()), estimator, role != "beyond", setting, source, role=role)

    return read


def computed(read: Callable[[Evidence], Observed | None]) -> Source:
    """A reader written out in full (:mod:`dpaudit.fidelity.derived`): a number that combines several
    committed results (an ordering, a share of cells, a trend)."""
    return read


def share_of_defences(
    audit: str,
    holds: Callable[[dict], bool],
    estimator: str,
    *,
    role: Role,
    setting: str,
    describe: str,
) -> Source:
    """The share of the published heuristic defences of ``results/<audit>.json["heuristics"]`` (one
    entry per defence) for which ``holds`` is true; ``describe`` names the keys it reads."""

    def read(evidence: Evidence) -> Observed | None:
        rows = evidence.group(audit, "heuristics")
        if not rows:
            return None
        share = fmean(1.0 if holds(row) else 0.0 for row in rows.values())
        source = f"results/{audit}.json: heuristics ({', '.join(sorted(rows))}) {describe}"
        return Observed(share, estimator, role != "beyond", setting, source, role=role)

    return read
