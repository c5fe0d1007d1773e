"""Is the update the correct clipped sum plus noise? The residual check, per trainable variable.

At every step the observer recomputes, at θ_t, the sum that the declared DP-SGD adds noise to:
K̄_t = Σ_i clip_C(g_{t,i}) over every record the batch held, and fits it out of the observed update
(:func:`dpaudit.training_audit.stepstats.residual_statistics`). Under the declaration what is left is the
Gaussian noise alone, on every coordinate, at the scale the probe measures, so for variable v with
d_v coordinates each step gives F_{t,v} = ‖R_{t,v}‖² / (d_v ŝ_t²), stochastically at most F(d_v, k)
(the fit removes one direction), independently over steps. Clipping the wrong thing (the batch's
gradient, some layers only, at another norm, microbatches of several records) leaves part of the
data's gradient in R_t and makes the mean of F_{t,v} over the run exceed its null; noise missing
from some variables makes it fall below. This is a conformance test at a level, not an ε bound (the
reference computation is Abadi et al.'s Algorithm 1). The null law of the mean of T independent
F-type ratios has no closed form: it is drawn by Monte Carlo from χ² variates (NumPy), and the p-value
is the usual (1 + #exceedances)/(1 + draws). Bonferroni over the variables and the two sides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpaudit.training_audit.check import CheckResult
from dpaudit.training_audit.transcript import Transcript

__all__ = ["BATCH_MIXING", "NAME", "layer_kinds", "mixing_warnings", "residual_check", "skip_reason"]

NAME = "clipped_sum_residual"
#: Monte Carlo draws of the null: at least this many, and 5 / (level share), so that a rejection is possible.
MIN_DRAWS = 2000
#: Layer types whose training output for one example depends on the rest of its batch.
BATCH_MIXING = ("BatchNormalization",)
#: Steps per block of null draws (bounds the memory of T × draws F variates).
BLOCK = 2_000_000


def _null_means(
    dims: int, probe: int, steps: int, draws: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``draws`` means over ``steps`` of (χ²_dims / dims) / (χ²_probe / probe) (the upper side's null)
    and of the same with χ²_{dims − 1} (the lower side's), from shared draws: χ²_dims = χ²_{dims−1} + Z²."""
    high, low = np.empty(draws), np.empty(draws)
    per_block = max(1, BLOCK // max(steps, 1))
    for start in range(0, draws, per_block):
        n = min(per_block, draws - start)
        rest = rng.chisquare(dims - 1, size=(n, steps)) if dims > 1 else np.zeros((n, steps))
        scale = 1.0 / (dims * rng.chisquare(probe, size=(n, steps)) / probe)
        low[start : start + n] = (rest * scale).mean(axis=1)
        high[start : start + n] = ((rest + rng.standard_normal((n, steps)) ** 2) * scale).mean(axis=1)
    return high, low


def layer_kinds(layers: Sequence[str]) -> tuple[list[str], list[str]]:
    """(layers that mix the examples of a batch, layers that are random in training), by type name
    (entries "Type 'name'" as :func:`dpaudit.training_audit.observer.stochastic_layers` writes them)."""
    mixing = [x for x in layers if x.split(" ")[0].endswith(BATCH_MIXING)]
    return mixing, [x for x in layers if x not in mixing]


def skip_reason(layers: Sequence[str]) -> str:
    """Why the residual check cannot run, naming the layers and what each kind does."""
    mixing, random = layer_kinds(layers)
    parts = (
        [f"{', '.join(random)} {'is' if len(random) == 1 else 'are'} random in training"] if random else []
    )
    if mixing:
        parts.append(f"{', '.join(mixing)} mix{'es' if len(mixing) == 1 else ''} the examples of a batch")
    what = (
        "; ".join(parts) if parts else "the model has layers that are random or mix the examples of a batch"
    )
    return (
        f"{what}, so the correct clipped sum cannot be recomputed exactly. To have clipping checked, audit a "
        "run of the same code with those layers off (e.g. Dropout rate 0) or removed"
    )


def mixing_warnings(layers: Sequence[str]) -> list[str]:
    """A warning per layer that mixes the examples of a batch (batch normalisation): DP-SGD's clipping
    bounds one record's own gradient, not its effect through the batch statistics on every other
    record's, and the layer's moving statistics are updated from the data without noise."""
    mixing, _ = layer_kinds(layers)
    return [
        f"{layer} mixes the examples of a batch (one record moves every other record's gradient through the "
        "batch statistics, which per-example clipping does not bound) and keeps moving statistics updated "
        "from the data without noise (released with the model, outside DP-SGD's guarantee): the claimed ε "
        "does not cover it; use a per-example normalisation (LayerNormalization, GroupNormalization) instead"
        for layer in mixing
    ]


def residual_check(transcript: Transcript, level: float, *, seed: int = 0) -> CheckResult:
    """The residual check at ``level``, two-sided per variable (Bonferroni over both sides of every
    variable); skipped, not rejected, when the run recorded no residuals (a model with random or
    batch-dependent layers).

    Too much left (upper side, null χ²_{d_v}): the records' gradients are not each clipped to C. Too
    little (lower side): the variable gets less noise than the probe's coordinates, i.e. noise is not
    added to every parameter; its null takes the fit's removed direction wholly from v (χ²_{d_v − 1}),
    the smallest the residual can be under the declaration, so it stays conservative.
    """
    if transcript.residual is None or transcript.residual_dims is None:
        return CheckResult.skipped(NAME, "mismatch", skip_reason(transcript.stochastic_layers))
    dims = np.asarray(transcript.residual_dims, dtype=np.int64)
    live = np.flatnonzero(dims > 0)
    share = level / max(2 * live.size, 1)
    draws = max(MIN_DRAWS, math.ceil(5.0 / share))
    rng = np.random.default_rng([seed, 7])
    k, steps = transcript.probe_dims, transcript.steps
    worst = (1.0, 0, 0.0, "high")
    for v in live:
        d = int(dims[v])
        observed = float(np.mean(transcript.residual[:, v] / d))
        if not math.isfinite(observed):
            worst = min(worst, (0.0, int(v), math.inf, "high"))
            continue
        high, low = _null_means(d, k, steps, draws, rng)
        p_high = (1.0 + float(np.sum(high >= observed))) / (1.0 + draws)
        p_low = (1.0 + float(np.sum(low <= observed))) / (1.0 + draws)
        worst = min(worst, (p_high, int(v), observed, "high"), (p_low, int(v), observed, "low"))
    p, v, stat, side = worst
    rejected = p <= share
    expected = k / (k - 2.0) if k > 2 else math.inf
    name = transcript.residual_names[v] if transcript.residual_names else str(v)
    if rejected and side == "high":
        message = (
            f"the update of {name} is not the per-example clipped sum plus noise: what is left after "
            f"fitting the correct Σ clip_C(g_i) is {stat:.3g}× the noise's variance (about {expected:.3g} "
            f"expected; p = {p:.2g} ≤ {share:.2g}): records' gradients are not each clipped to C as "
            "declared (clipping of the batch, of some layers only, at another norm, or microbatches of "
            "several records)"
        )
    elif rejected:
        message = (
            f"{name} gets less noise than the declared σC: what is left of its update after fitting the "
            f"correct Σ clip_C(g_i) is {stat:.3g}× the noise's variance on the probe (about {expected:.3g} "
            f"expected; p = {p:.2g} ≤ {share:.2g}): noise is not added to every parameter at one scale"
        )
    else:
        message = (
            f"the update is the per-example clipped sum plus noise on every variable (residual "
            f"{stat:.3g}× the noise's variance on {name}, the least likely; p = {p:.2g})"
        )
    return CheckResult(NAME, "mismatch", rejected, level, p, stat, message)
