"""Conformance checks: is the observed run the DP-SGD its declaration describes?

Each check compares one run's :class:`~dpaudit.training_audit.transcript.Transcript` with its
:class:`~dpaudit.training_audit.declaration.DeclaredDPSGD`. A rejected ``"mismatch"`` check proves (at its
level) that the code is NOT the declared DP-SGD, so the claimed ε was computed for another mechanism;
it is never an ε bound. A ``"warning"`` is labelled as such and never enters a verdict.

Levels. :func:`run_checks` gets the run's total false-alarm budget ``level`` for its mismatch checks.
Deterministic checks (``steps``, ``records_per_epoch``) cost nothing. Two checks are exact in practice:
``repeated_batches`` and the relative part of ``noise_present`` can fire under the declaration only
with a probability we bound in closed form (see their functions); that bound is their level and is
taken off the budget (or the check is reduced/skipped when the bound exceeds level/4). The rest is
split equally (Bonferroni) among the stochastic mismatch checks that apply
(:data:`STOCHASTIC_MISMATCH_CHECKS`, the clipped-sum residual of :mod:`dpaudit.training_audit.residual`
among them); each is exact or conservative at its share. Warnings run at ``level``; so do the checks
of :data:`ASSUMES_SGD_UPDATE` when the evidence is the weights' change, as labelled warnings. So under
the declared DP-SGD, P(any mismatch rejected) ≤ ``level``.

Notation as in :mod:`dpaudit.training_audit.transcript`: ŝ_t = ‖probe_t‖/√k, and under the declaration
‖probe_t‖² · (n_t / σC)² ~ χ²_k independently over steps (n_t the code's unknown divisor).

References: the declared step is Abadi et al. 2016, "Deep Learning with Differential Privacy",
Alg. 1 (per-example clipping at C, noise N(0, σ²C²I), Poisson sampling for the accountant); shuffled
batches are not what it analyses (Chua et al. 2024, "How Private are DP-SGD Implementations?");
the cosine of two independent isotropic vectors in R^k has density ∝ (1 − c²)^((k−3)/2) (the angle's
density ∝ sin^(k−2) θ; Cai, Fan & Jiang 2013, "Distributions of angles in random packing on
spheres", JMLR), i.e. (1 + c)/2 ~ Beta((k−1)/2, (k−1)/2); Monte Carlo p-values (1 + #)/(1 + draws)
are exact (Phipson & Smyth 2010, "Permutation p-values should never be zero"). scipy.stats gives
every distribution (binomtest, binom, chi2, beta); written here, because no library has them: the
union bounds of ``repeated_batches``, ``noise_floor`` and ``fixed_size_batches``; the signal-to-noise
checks and their exact null are in :mod:`dpaudit.training_audit.snr`. Every null comes from the declared
mechanism, never from the run's own spread (which a bug would widen).

Statuses (:mod:`dpaudit.training_audit.check`): a check that applies but cannot run is ``skipped`` with its
reason; one that has nothing to test under the declaration is ``not applicable``; neither is passed.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.special import gammaln, logsumexp
from scipy.stats import beta, binom, binomtest, chi2

from dpaudit.training_audit.check import REJECTED, SKIPPED, CheckResult
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.residual import residual_check
from dpaudit.training_audit.snr import snr_checks
from dpaudit.training_audit.tap import tap_check
from dpaudit.training_audit.transcript import Transcript

__all__ = ["ASSUMES_SGD_UPDATE", "STOCHASTIC_MISMATCH_CHECKS", "CheckResult", "check_summary", "run_checks"]

STOCHASTIC_MISMATCH_CHECKS: tuple[str, ...] = (
    "batch_size_mean",
    "noise_floor",
    "noise_reuse",
    "signal_to_noise_high",
    "signal_to_noise_low",
    "clipped_sum_residual",
)
#: Checks that read the update as the privatized gradient. When the evidence is the weights' change
#: (the code never called ``apply_gradients``) they hold only for a plain SGD step (a learning-rate
#: schedule, momentum or Adam change or correlate successive changes), so there they run as warnings.
ASSUMES_SGD_UPDATE = frozenset(STOCHASTIC_MISMATCH_CHECKS) - {"batch_size_mean"}
SGD_NOTE = " (from the weights' change, assuming a plain SGD update; a warning)"
#: A probe below this fraction of the median probe norm is "no noise" (float noise of a noiseless sum).
NO_NOISE = 1e-6
#: Bytes of one block of the probes' Gram matrix (T up to 20,000 stays near this).
GRAM_BYTES = 100_000_000


def _sf(x: float) -> str:
    return f"{x:.3g}"


def _steps_check(transcript: Transcript, declared: DeclaredDPSGD) -> CheckResult:
    """T steps observed against the declared T (exact). A shuffled run declared by ``epochs`` may drop
    each epoch's last partial batch (``drop_remainder=True`` or a filter): epochs·⌊N/B⌋ steps, fewer
    than epochs·⌈N/B⌉, each record in at most one batch per epoch, as declared."""
    seen, want = transcript.steps, declared.total_steps
    dropped = (
        declared.epochs is not None
        and declared.sampling == "shuffle"
        and seen == int(declared.epochs) * (declared.dataset_size // declared.batch_size)
    )
    if seen > want:
        msg = (
            f"{seen} training steps observed, {want} declared: more noisy steps than the claim's accountant "
            "composed, so the run spent more privacy than the claimed ε"
        )
    elif dropped and seen < want:
        msg = (
            f"{seen} training steps observed: {declared.epochs} epochs of ⌊N/B⌋ full batches (the last "
            "partial batch dropped)"
        )
    elif seen < want:
        msg = (
            f"{seen} training steps observed, {want} declared: the run is not the one the claim was computed "
            "for (fewer steps spend less privacy, but the audit did not see the declared run)"
        )
    else:
        msg = f"{seen} training steps observed, as declared"
    rejected = seen != want and not dropped
    return CheckResult("steps", "mismatch", rejected, 0.0, None, float(seen - want), msg)


def _pass_ends(rows: np.ndarray, batch: int) -> np.ndarray:
    """Steps that end a pass over the data in a shuffled loader whose batches do not straddle passes:
    the steps with fewer than B real records (each pass's last, partial batch)."""
    return np.flatnonzero(rows < batch)


def _records_per_epoch_check(transcript: Transcript, declared: DeclaredDPSGD) -> CheckResult:
    """Shuffled passes feed each record at most once: no batch holds more than B real records, and no
    pass over the data feeds more than N.

    A data pass is counted by the records fed, not by Keras epochs: with ``steps_per_epoch`` or
    ``repeat()`` a Keras epoch is not a pass. Where the declaration counts ``epochs`` the Keras epochs
    are the passes (the step check holds them to ⌈N/B⌉ or ⌊N/B⌋ steps). Where it counts ``steps``, a
    Keras epoch of at most N records is within one pass; a longer one is split where the stream shows
    a pass ending (a batch with fewer than B real records: a pass's partial last batch), and each
    stretch between two such ends must hold at most N records. A longer Keras epoch with no visible pass
    end cannot be told apart from a loader that repeats records within a pass: the check is then
    skipped, and says so."""
    name = "records_per_epoch"
    N, B = declared.dataset_size, declared.batch_size
    rows = transcript.batch_rows
    problems = []
    big = np.flatnonzero(rows > B)
    if big.size:
        problems.append(
            f"step {int(big[0])} held {int(rows[big[0]])} real records, more than the declared B = {B} "
            f"({big.size} such step(s))"
        )
    epochs = np.unique(transcript.epoch)
    per_epoch = np.bincount(np.searchsorted(epochs, transcript.epoch), weights=rows)
    over = [(int(e), int(r)) for e, r in zip(epochs, per_epoch, strict=True) if r > N]
    blind = False
    if over and declared.epochs is not None:
        problems += [
            f"epoch {e} fed {r} real records, more than the N = {N} the claim assumes" for e, r in over[:2]
        ]
    elif over:
        ends = _pass_ends(rows, B)
        if ends.size:
            bounds = np.concatenate([[0], ends + 1, [rows.size]])
            stretch = np.add.reduceat(rows, bounds[:-1][bounds[:-1] < rows.size])
            # the first and last stretch may be cut by the run's start or end; every stretch holds ≤ N
            worst = int(np.argmax(stretch))
            if stretch[worst] > N:
                problems.append(
                    f"{int(stretch[worst])} real records fed between two partial batches (steps up to "
                    f"{int(bounds[worst + 1]) - 1}), more than the N = {N} of one pass"
                )
        else:
            blind = True
    if problems:
        msg = (
            "; ".join(problems[:3])
            + ": the loader feeds records more often than the declared shuffled passes"
        )
        stat = float(max(per_epoch.max() / N, rows.max() / B))
        return CheckResult(name, "mismatch", True, 0.0, None, stat, msg)
    if blind:
        e, r = over[0]
        return CheckResult.skipped(
            name,
            "mismatch",
            f"Keras epoch {e} fed {r} real records, more than N = {N}, in full batches with no pass end in "
            "sight (fit(steps_per_epoch=…) over a repeated dataset, or records repeated within a pass: the "
            "counts cannot tell). To have it checked, let each Keras epoch be one pass over the data, or "
            "keep the last partial batch",
        )
    msg = f"no batch above B = {B} real records and no pass over the data above N = {N}, as declared"
    return CheckResult(name, "mismatch", False, 0.0, None, float(per_epoch.max() / N), msg)


def _batch_size_mean_check(transcript: Transcript, declared: DeclaredDPSGD, share: float) -> CheckResult:
    """Σ_t batch_rows ~ Binomial(N·T, q) under Poisson sampling: exact two-sided binomial test."""
    total, T = int(transcript.batch_rows.sum()), transcript.steps
    p = float(binomtest(total, declared.dataset_size * T, declared.sampling_rate).pvalue)
    mean = total / T
    rejected = p <= share
    if rejected:
        msg = (
            f"mean batch of {mean:.4g} real records per step vs the declared B = {declared.batch_size} "
            f"(p = {p:.2g}): the sampling rate is not the declared q = {declared.sampling_rate:.4g} "
            "(a higher rate spends more privacy than claimed)"
        )
    else:
        msg = f"mean batch of {mean:.4g} real records per step, consistent with B = {declared.batch_size}"
    return CheckResult("batch_size_mean", "mismatch", rejected, share, p, mean, msg)


def _fixed_size_check(transcript: Transcript, declared: DeclaredDPSGD, level: float) -> CheckResult:
    """Poisson: the most common batch size holds c of T steps; under Binomial(N, q) sizes,
    P(some size holds ≥ c steps) ≤ Σ_v P[Binomial(T, pmf(v)) ≥ c] (union bound over sizes v, sizes
    beyond ±40 s.d. bounded by T·P(outside)). Shuffle: the claim is for Poisson, so always warn."""
    name = "fixed_size_batches"
    not_proven = "so the claimed ε is not proven for this sampling (a warning, not a violation)"
    if declared.sampling == "shuffle":
        msg = (
            f"the declaration says shuffled fixed-size batches of B = {declared.batch_size} while the "
            f"claim is computed for Poisson sampling at q = {declared.sampling_rate:.4g}, {not_proven}"
        )
        return CheckResult(name, "warning", True, 0.0, None, float("nan"), msg)
    values, counts = np.unique(transcript.batch_rows, return_counts=True)
    top, T = int(np.argmax(counts)), transcript.steps
    N, q = declared.dataset_size, declared.sampling_rate
    sd = math.sqrt(N * q * (1 - q))
    lo, hi = max(0, math.floor(N * q - 40 * sd - 5)), min(N, math.ceil(N * q + 40 * sd + 5))
    v = np.arange(lo, hi + 1)
    outside = float(binom.cdf(lo - 1, N, q) + binom.sf(hi, N, q))
    p = min(1.0, float(binom.sf(counts[top] - 1, T, binom.pmf(v, N, q)).sum()) + T * outside)
    share_top = counts[top] / T
    rejected = p <= level
    msg = (
        f"{100 * share_top:.3g} % of the steps had exactly {values[top]} real records (p = {p:.2g}), "
        "where Poisson sampling varies the size (Binomial(N, q)): "
    ) + (
        f"fixed-size shuffled batches were used under a Poisson accountant, {not_proven}"
        if rejected
        else "batch sizes vary as Poisson sampling does"
    )
    return CheckResult(name, "warning", rejected, level, p, float(share_top), msg)


def _repeat_bound(declared: DeclaredDPSGD, steps: int) -> float:
    """Union bound, over the T(T−1)/2 pairs of steps, on two random batches of > 1 record being equal.

    Poisson at q: P(S_t = S_u, |S| ≥ 2) = Σ_{n≥2} pmf(n; N, q)² / C(N, n) (given its size, a batch is
    a uniform subset), summed within ±50 s.d. of Nq and bounded by the Binomial mass outside. Shuffle:
    a batch of n is a uniform n-subset, equal to one of another epoch w.p. 1/C(N, n). (Distinct
    multisets with equal 64-bit keys add ~T²/2^65, negligible.)"""
    N, B, q = declared.dataset_size, declared.batch_size, declared.sampling_rate
    pairs = steps * (steps - 1) / 2.0
    if pairs == 0:
        return 0.0

    def log_choose(n: np.ndarray) -> np.ndarray:
        return gammaln(N + 1) - gammaln(n + 1) - gammaln(N - n + 1)

    if declared.sampling == "shuffle":
        sizes = np.array([s for s in (B, N - (declared.steps_per_epoch - 1) * B) if s >= 2])
        return min(1.0, pairs * float(np.exp(-log_choose(sizes)).max())) if sizes.size else 0.0
    sd = math.sqrt(N * q * (1 - q))
    lo, hi = max(2, math.floor(N * q - 50 * sd)), min(N, math.ceil(N * q + 50 * sd) + 2)
    if lo > hi:
        return 0.0
    n = np.arange(lo, hi + 1)
    inside = math.exp(float(logsumexp(2 * binom.logpmf(n, N, q) - log_choose(n))))
    outside = max(0.0, float(binom.cdf(lo - 1, N, q) - binom.cdf(1, N, q) + binom.sf(hi, N, q)))
    return min(1.0, pairs * (inside + outside))


def _repeated_batches_check(transcript: Transcript, bound: float, runs: bool) -> CheckResult:
    name = "repeated_batches"
    if not runs:
        reason = (
            f"the declared sampling repeats a batch by chance with probability up to {bound:.2g} (dataset "
            "too small for a repeat to be evidence)"
        )
        return CheckResult.skipped(name, "mismatch", reason)
    steps = np.flatnonzero(transcript.batch_rows > 1)
    _, inverse, counts = np.unique(transcript.batch_keys[steps], return_inverse=True, return_counts=True)
    again = steps[counts[inverse] > 1]
    repeats = float(np.sum(counts * (counts - 1) / 2))
    if again.size:
        t = int(again[0])
        u = int(again[(transcript.batch_keys[again] == transcript.batch_keys[t])][1])
        msg = (
            f"steps {t} and {u} drew the same batch of {int(transcript.batch_rows[t])} records "
            f"({int(repeats)} repeated pair(s)); random per-step sampling repeats a batch with "
            f"probability ≤ {bound:.2g}: the loader replays batches, so records are used more often "
            "than the claim assumes"
        )
    else:
        msg = "no two steps drew the same batch of records"
    return CheckResult(name, "mismatch", bool(again.size), bound, None, repeats, msg)


def _floor_p_value(ratio: float, steps: int, k: int, allowance: float) -> float:
    """Conservative P[min_t ŝ_t² / median_s ŝ_s² ≤ ratio] under the declaration.

    With u_t = ‖probe_t‖²(n_t/σC)² iid χ²_k and divisors within a factor A = ``allowance`` of each
    other, the event implies u_t ≤ ratio·A²·median(u) for some t; for any X it then has probability
    ≤ T·F_k(ratio·A²·X) + P[median(u) > X], and P[median > X] ≤ P[Binomial(T, P(χ²_k > X)) ≥ ⌈T/2⌉].
    Minimised over a grid of X (each term is a valid bound, so their minimum is)."""
    if steps < 2:
        return 1.0
    x = np.concatenate([chi2.ppf(np.linspace(0.5, 0.999, 120), k), chi2.isf(np.logspace(-3.2, -16, 40), k)])
    above = binom.sf(math.ceil(steps / 2) - 1, steps, chi2.sf(x, k))
    return float(min(1.0, np.min(steps * chi2.cdf(ratio * allowance**2 * x, k) + above)))


def _noise_present_check(transcript: Transcript, sq: np.ndarray, bound: float, relative: bool) -> CheckResult:
    med = float(np.median(sq))
    quiet = (sq == 0) | ~np.isfinite(sq)
    if relative:
        quiet |= sq < NO_NOISE**2 * med
    where = np.flatnonzero(quiet)
    if where.size:
        msg = (
            f"no noise at step(s) {where[:5].tolist()}{' …' if where.size > 5 else ''} ({where.size} of "
            f"{sq.size}) on coordinates no record moves: those steps released their gradient without the "
            "Gaussian noise σC the claim needs (ε is unbounded there)"
        )
    else:
        msg = "every step's probe carries noise"
    return CheckResult("noise_present", "mismatch", bool(where.size), bound, None, float(where.size), msg)


def _noise_floor_check(sq: np.ndarray, k: int, allowance: float, share: float) -> CheckResult:
    steps = np.flatnonzero(np.isfinite(sq))
    med = float(np.median(sq[steps])) if steps.size else 0.0
    t = int(steps[np.argmin(sq[steps])]) if steps.size else 0
    ratio = float(sq[t] / med) if med > 0 else 0.0
    p = _floor_p_value(ratio, steps.size, k, allowance) if steps.size >= 2 else 1.0
    rejected = p <= share
    msg = (
        f"step {t}'s noise is {math.sqrt(ratio):.3g}× the median step's in scale (p = {p:.2g}, allowing the "
        f"divisor to vary {allowance:.3g}× with the batch): "
    ) + (
        "some step carries less noise than σC/n_t, i.e. less than declared"
        if rejected
        else "no step's noise falls below the others' beyond chance"
    )
    return CheckResult("noise_floor", "mismatch", rejected, share, p, ratio, msg)


def _max_cosine(probe: np.ndarray) -> tuple[float, int, int]:
    """max over t < u of |cos(probe_t, probe_u)|, the Gram matrix computed in row blocks."""
    U = probe / np.linalg.norm(probe, axis=1, keepdims=True)
    T = U.shape[0]
    block = max(1, GRAM_BYTES // (8 * T))
    best, pair = -1.0, (0, 1)
    for i in range(0, T - 1, block):
        g = U[i : i + block] @ U[i + 1 :].T  # row r, column c: steps i + r and i + 1 + c
        np.abs(g, out=g)
        g[np.tril_indices(g.shape[0], -1, g.shape[1])] = -1.0  # keep only u > t
        flat = int(np.argmax(g))
        r, c = divmod(flat, g.shape[1])
        if g[r, c] > best:
            best, pair = float(g[r, c]), (i + r, i + 1 + c)
    return min(best, 1.0), pair[0], pair[1]


def _noise_reuse_check(transcript: Transcript, ok: np.ndarray, share: float) -> CheckResult:
    """Under the declaration probes are independent isotropic Gaussians: (1 + cos)/2 ~ Beta((k−1)/2,
    (k−1)/2) for each pair; Bonferroni over the T(T−1)/2 pairs of the max |cos|."""
    steps = np.flatnonzero(ok)
    c, t, u = _max_cosine(transcript.probe[steps])
    a, pairs = (transcript.probe_dims - 1) / 2.0, steps.size * (steps.size - 1) / 2.0
    p = float(min(1.0, pairs * 2.0 * beta.sf((1.0 + c) / 2.0, a, a)))
    rejected = p <= share
    t, u = int(steps[t]), int(steps[u])
    msg = (f"largest |cos| between two steps' probe noise is {c:.3g} (steps {t} and {u}; p = {p:.2g}): ") + (
        "the same noise was reused at several steps, so it cancels between them and protects nothing"
        if rejected
        else "the steps' noise looks independent"
    )
    return CheckResult("noise_reuse", "mismatch", rejected, share, p, c, msg)


def run_checks(
    transcript: Transcript, declared: DeclaredDPSGD, level: float, *, seed: int = 0
) -> list[CheckResult]:
    """Every conformance check of one run; the mismatch checks jointly at ``level`` (see the module
    docstring for the split), warnings each at ``level``; ``seed`` drives the Monte Carlo nulls."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    T, k = transcript.steps, transcript.probe_dims
    poisson = declared.sampling == "poisson"
    sq = transcript.probe_scale**2
    ok = np.isfinite(sq) & (sq > 0)
    divisors = np.maximum(transcript.batch_rows + transcript.canary_rows, 1)
    allowance = float(divisors.max() / divisors.min()) if T else 1.0
    repeat_bound = _repeat_bound(declared, T)
    repeat_runs = repeat_bound <= level / 4
    quiet_bound = _floor_p_value(NO_NOISE**2, T, k, allowance)
    relative = quiet_bound <= level / 4
    budget = level - (repeat_bound if repeat_runs else 0.0) - (quiet_bound if relative else 0.0)
    signal_seen = bool(np.any(ok & (transcript.signal > 0) & np.isfinite(transcript.signal_observed)))
    applies = {
        "batch_size_mean": poisson and T > 0,
        "noise_floor": T >= 2,
        "noise_reuse": k >= 2 and int(ok.sum()) >= 2,
        "signal_to_noise_high": signal_seen,
        "signal_to_noise_low": signal_seen and not transcript.stochastic_layers,
        "clipped_sum_residual": transcript.residual is not None,
    }
    as_warning = ASSUMES_SGD_UPDATE if transcript.source == "iterates" else frozenset()
    share = budget / max(1, sum(on for name, on in applies.items() if name not in as_warning))

    def level_of(name: str) -> float:
        return level if name in as_warning else share

    results = [_steps_check(transcript, declared), tap_check(transcript, level)]
    if T == 0:
        return results
    na, skip = CheckResult.not_applicable, CheckResult.skipped
    if poisson:
        results.append(na("records_per_epoch", "mismatch", "Poisson sampling makes no passes over the data"))
        results.append(_batch_size_mean_check(transcript, declared, share))
    else:
        results.append(_records_per_epoch_check(transcript, declared))
        results.append(na("batch_size_mean", "mismatch", "shuffled batches hold B records by construction"))
    results.append(_fixed_size_check(transcript, declared, level))
    results.append(_repeated_batches_check(transcript, repeat_bound, repeat_runs))
    results.append(_noise_present_check(transcript, sq, quiet_bound if relative else 0.0, relative))
    if applies["noise_floor"]:
        results.append(_noise_floor_check(sq, k, allowance, level_of("noise_floor")))
    else:
        results.append(na("noise_floor", "mismatch", "one step: no other step's noise to compare with"))
    if applies["noise_reuse"]:
        results.append(_noise_reuse_check(transcript, ok, level_of("noise_reuse")))
    else:
        why = "the probe has one coordinate" if k < 2 else f"only {int(ok.sum())} step(s) carry probe noise"
        results.append(skip("noise_reuse", "mismatch", f"{why}: no pair of steps' noise to compare"))
    results.extend(snr_checks(transcript, ok, level_of("signal_to_noise_high"), seed))
    results.append(residual_check(transcript, level_of("clipped_sum_residual"), seed=seed))
    return [
        dataclasses.replace(r, kind="warning", message=r.message + SGD_NOTE) if r.name in as_warning else r
        for r in results
    ]


def check_summary(results: list[CheckResult]) -> str:
    """A few lines: the mismatch verdict of these checks, then one line per check with its status."""
    bad = [r.name for r in results if r.kind == "mismatch" and r.rejected]
    idle = [r.name for r in results if r.status == SKIPPED]
    lines = [f"DOES NOT MATCH the declared DP-SGD: {', '.join(bad)}" if bad
             else "matches the declared DP-SGD on every mismatch check that ran"
             + (f" ({len(idle)} skipped: {', '.join(idle)})" if idle else "")]  # fmt: skip
    for r in results:
        state = ("REJECTED" if r.kind == "mismatch" else "WARNING") if r.status == REJECTED else r.status
        p = f", p = {r.p_value:.2g}" if r.p_value is not None else ""
        lines.append(f"  [{state}] {r.name} ({r.kind}, level {r.level:.2g}{p}): {r.message}")
    return "\n".join(lines)
