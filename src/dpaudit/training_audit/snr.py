"""The canaries' signal-to-noise checks: the whole run and each part of it, against the declared null.

Under the declared DP-SGD a_t = (b_t + Z_t)/w_t, Z_t ~ N(0, 1), w_t = √(χ²_k/k) independent over
steps (:mod:`dpaudit.training_audit.transcript`), so ρ̂ = Σ b_t a_t / Σ b_t² has an exact conditional law given
the observed b_t, drawn here by Monte Carlo. Nothing of that null comes from the run's own spread: a
bug cannot widen the yardstick it is measured with.

A bug that acts on part of training only (a clip norm raised, or the noise lowered, for the last
epochs) moves the pooled ρ̂ by its share of the run; the estimate on the steps it touches moves by its
full size. So each side combines two tests by a weighted Bonferroni split of its share (Holm 1979;
:data:`POOLED_WEIGHT` to the pooled ρ̂, which has the most power against a bug throughout the run,
the rest to the parts): the pooled ρ̂'s marginal p-value, and the smallest marginal p-value of ρ̂ on
each of :data:`SEGMENTS` contiguous parts of the run, whose null law is taken from the same joint
draws (Westfall & Young 1993, "Resampling-Based Multiple Testing", min-p). The observed run is ranked
among the draws as one more exchangeable sample, so each p-value (1 + #)/(1 + draws) is exact
(Phipson & Smyth 2010); the reported p-value is min(p_pooled / w, p_parts / (1 − w)), capped at 1.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.training_audit.check import CheckResult
from dpaudit.training_audit.transcript import Transcript

__all__ = ["NAMES", "NULL_DRAWS", "POOLED_WEIGHT", "SEGMENTS", "segment_estimates", "snr_checks", "snr_null"]

NAMES = ("signal_to_noise_high", "signal_to_noise_low")
#: Monte Carlo draws of the null (at least; more when the level share is tiny).
NULL_DRAWS = 4000
#: Contiguous parts of the run tested on their own besides the whole (a bug in part of training).
SEGMENTS = 4
#: The share of each side's level given to the pooled ρ̂ (the parts get the rest).
POOLED_WEIGHT = 0.75


def _parts(size: int) -> list[np.ndarray]:
    return [p for p in np.array_split(np.arange(size), min(SEGMENTS, size)) if p.size]


def segment_estimates(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[pooled ρ̂, ρ̂ on each contiguous part] of the observed (a_t, b_t)."""
    parts = _parts(b.size)
    return np.array([b @ a / (b @ b)] + [b[p] @ a[p] / (b[p] @ b[p]) for p in parts])


def snr_null(b: np.ndarray, k: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """[draws, 1 + parts] draws of :func:`segment_estimates` under the declaration (ρ = 1): on part s,
    ρ̂_s = Σ b²/w / Σ b² + N(0, Σ b²/w²)^{1/2}/Σ b² given w (exact), and the pooled ρ̂ is their
    Σ b²-weighted mean."""
    parts = _parts(b.size)
    totals = np.array([b[p] @ b[p] for p in parts])
    out = np.empty((draws, 1 + len(parts)))
    chunk = max(1, 2_000_000 // b.size)
    b2 = b * b
    for i in range(0, draws, chunk):
        n = min(chunk, draws - i)
        inv_w = 1.0 / np.sqrt(rng.chisquare(k, size=(n, b.size)) / k)
        for s, p in enumerate(parts):
            mean = inv_w[:, p] @ b2[p]
            sd = np.sqrt(inv_w[:, p] ** 2 @ b2[p])
            out[i : i + n, 1 + s] = (mean + sd * rng.standard_normal(n)) / totals[s]
    out[:, 0] = out[:, 1:] @ totals / totals.sum()
    return out


def _min_p(observed: np.ndarray, null: np.ndarray, upper: bool) -> tuple[float, int]:
    """Exact Monte Carlo p-value of the smallest marginal p-value over the columns (observed ranked as
    one more sample), and the column that gave the observed's smallest."""
    values = np.vstack([observed[None, :], null])
    if not upper:
        values = -values
    total = values.shape[0]
    # marginal p of every row and column: the share of rows at least as extreme (itself included)
    order = np.sort(values, axis=0)
    marginal = np.empty_like(values)
    for j in range(values.shape[1]):
        marginal[:, j] = (total - np.searchsorted(order[:, j], values[:, j], side="left")) / total
    smallest = marginal.min(axis=1)
    p = float(np.sum(smallest <= smallest[0])) / total
    return p, int(np.argmin(marginal[0]))


def _combined_p(observed: np.ndarray, null: np.ndarray, upper: bool) -> tuple[float, int]:
    """min(p_pooled / w, p_parts / (1 − w)) and the column behind it (0: pooled, s: part s)."""
    pooled, _ = _min_p(observed[:1], null[:, :1], upper)
    parts, at = _min_p(observed[1:], null[:, 1:], upper)
    w = POOLED_WEIGHT
    if pooled / w <= parts / (1.0 - w):
        return min(1.0, pooled / w), 0
    return min(1.0, parts / (1.0 - w)), 1 + at


def snr_checks(
    transcript: Transcript, ok: np.ndarray, share: float, seed: int
) -> tuple[CheckResult, CheckResult]:
    """Both sides at ``share`` each; skipped (and said) when no canary joined a step with probe noise."""
    a, b = transcript.signal_observed, transcript.signal
    use = ok & np.isfinite(a) & np.isfinite(b) & (b > 0)
    left_out = int(np.sum(~ok))
    if not use.any():
        reason = (
            "no canary joined any step with probe noise (Σ b_t² = 0), so the canaries' signal-to-noise is "
            "unseen"
        )
        return CheckResult.skipped(NAMES[0], "mismatch", reason), CheckResult.skipped(
            NAMES[1], "mismatch", reason
        )
    steps = np.flatnonzero(use)
    b, a = b[use], a[use]
    observed = segment_estimates(a, b)
    rho = float(observed[0])
    draws = min(100_000, max(NULL_DRAWS, math.ceil(8.0 / share)))
    null = snr_null(b, transcript.probe_dims, draws, np.random.default_rng([seed, 0x5A7]))
    p_high, at_high = _combined_p(observed, null, upper=True)
    p_low, at_low = _combined_p(observed, null, upper=False)
    pooled = np.sort(null[:, 0])
    centre = float(np.mean(pooled))
    j = math.floor(share * (1.0 + draws))  # the (1 − 2·share) interval, by shifting the null to ρ̂
    lo = rho - (pooled[draws - j] - centre) if j >= 1 else -math.inf
    hi = rho + (centre - pooled[j - 1]) if j >= 1 else math.inf
    parts = _parts(b.size)

    def where(col: int) -> str:
        if col == 0:
            return ""
        p = parts[col - 1]
        return f"; steps {int(steps[p[0]])}–{int(steps[p[-1]])}: {observed[col]:.3g}×"

    head = (
        f"signal-to-noise of the canaries is {rho:.3g}× the declared ({100 * (1 - 2 * share):.3g} % interval "
        f"{lo:.3g}–{hi:.3g}"
    )
    tail = f", {left_out} step(s) without probe noise left out" if left_out else ""
    high, low = p_high <= share, p_low <= share
    over = f"over the run and {len(parts)} parts{tail}"
    msg_high = f"{head}{where(at_high) if high else ''}, p = {p_high:.2g} {over}): " + (
        "noise below σC or clipping above C: the canaries moved the model more than per-example "
        "clipping at C with noise σC allows, so ε is larger than claimed"
        if high
        else "not above what per-example clipping at C with noise σC allows, in the whole run or any part"
    )
    msg_low = f"{head}{where(at_low) if low else ''}, p = {p_low:.2g} {over}): " + (
        "less than per-example clipping at C predicts (e.g. the batch's gradient is clipped instead of "
        "each example's, or microbatches of several records): the claim is not proven for this code"
        if low
        else "not below what per-example clipping at C predicts, in the whole run or any part"
    )
    result_high = CheckResult(NAMES[0], "mismatch", bool(high), share, p_high, rho, msg_high)
    if transcript.stochastic_layers:
        return result_high, _low_skipped_for(transcript.stochastic_layers, rho)
    return result_high, CheckResult(NAMES[1], "mismatch", bool(low), share, p_low, rho, msg_low)


def _low_skipped_for(layers: tuple[str, ...], rho: float) -> CheckResult:
    """With layers random in training (Dropout) or mixing the batch (BatchNormalization) the audit's
    recomputed canary gradient is not the one the step used, so the observed alignment falls below the
    declared signal on correct code (ρ̂ ≈ 0.8 with Dropout(0.1) measured on the bug catalogue's
    control): the low side would be a false alarm. The high side stays: a clipped canary gradient
    aligned with another direction adds at most its own norm along it, so ρ̂ > 1 is still evidence."""
    reason = (
        f"{', '.join(layers)} make the step's canary gradients differ from the audit's recomputation, which "
        f"lowers the observed signal-to-noise ({rho:.3g}× here) on correct code. To check for too little "
        "signal, audit a run of the same code with those layers off"
    )
    return CheckResult.skipped(NAMES[1], "mismatch", reason)
