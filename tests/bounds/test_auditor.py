"""The scores auditor on known answers: every bound named valid holds its stated (joint) level.

Monte Carlo: scores are simulated directly from mechanisms whose ε is known exactly (Gaussian
mechanism: the analytic curve; randomised response: log(p/(1 − p)); Poisson-subsampled Gaussian:
dp_accounting's PLD at a fine grid), vectorised over repeats. A bound "overclaims" in a repeat when
it exceeds the true ε; the share of such repeats may exceed 1 − confidence only by Monte Carlo error
(3 standard errors). Low confidence levels (0.5, 0.8) are used besides 0.95 because a bound that
is conservative at 0.95 could hide a wrong level there.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.bounds import auditor as aud
from dpaudit.bounds import empirical as emp
from dpaudit.bounds.accountants import epsilon_pld, gaussian_epsilon
from dpaudit.bounds.tradeoff import SubsampledGaussian, gaussian_tradeoff, gdp_mu_lower


def allowed(confidence: float, reps: int) -> float:
    p = 1.0 - confidence
    return p + 3.0 * math.sqrt(p * (1.0 - p) / reps)


def sweep(pos: np.ndarray, neg: np.ndarray, delta: float, confidence: float, method: str, seed: int) -> float:
    return emp.epsilon_lower_from_scores(pos, neg, delta, confidence, method, seed).epsilon_lower  # type: ignore[arg-type]


def gdp(
    pos: np.ndarray, neg: np.ndarray, delta: float, confidence: float, selection: str, seed: int
) -> float:
    return aud.gdp_lower_bound(
        pos, neg, delta=delta, confidence=confidence, selection=selection, seed=seed
    ).epsilon


@pytest.mark.parametrize(("mu", "n", "reps"), [(1.0, 200, 200), (2.0, 1000, 120), (0.5, 5000, 60)])
@pytest.mark.parametrize("confidence", [0.5, 0.95])
def test_gaussian_mechanism_every_valid_bound_holds_its_level(mu, n, reps, confidence):
    delta = 1e-3
    true_eps = gaussian_epsilon(mu, delta)
    rng = np.random.default_rng(int(10 * mu) + n)
    pos, neg = rng.normal(mu, 1.0, (reps, n)), rng.normal(0.0, 1.0, (reps, n))
    estimators = {
        "sweep_split": lambda p, q, r: sweep(p, q, delta, confidence, "split", r),
        "sweep_bonferroni": lambda p, q, r: sweep(p, q, delta, confidence, "bonferroni", r),
        "gdp_midpoint": lambda p, q, r: gdp(p, q, delta, confidence, "midpoint", r),
    }
    if n == 200:
        estimators["gdp_split"] = lambda p, q, r: gdp(p, q, delta, confidence, "split", r)
    for name, estimate in estimators.items():
        values = np.array([estimate(pos[r], neg[r], r) for r in range(reps)])
        assert np.mean(values > true_eps) <= allowed(confidence, reps), name
    # The GDP bound is the tight one: at joint 95 % and μ = 2, n = 1000 it reaches most of ε.
    if (mu, n, confidence) == (2.0, 1000, 0.95):
        values = np.array([gdp(pos[r], neg[r], delta, confidence, "midpoint", r) for r in range(20)])
        assert np.mean(values) > 0.75 * true_eps


@pytest.mark.parametrize(("epsilon", "n"), [(1.0, 200), (2.0, 1000)])
@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_randomised_response_on_its_boundary(epsilon, n, confidence):
    # One bit, reported truthfully with probability p = e^ε/(1 + e^ε): the threshold "bit = 1" has
    # FPR = FNR = 1 − p, exactly on the ε boundary (Eq. 4 with δ = 0 gives ε). Before the joint-level
    # fix the split bound exceeded ε in 7.4 % and the count bound in 7.6 % of repeats at "95 %".
    p = math.exp(epsilon) / (1.0 + math.exp(epsilon))
    reps = 2000
    rng = np.random.default_rng(5)
    # Count bound, vectorised: FP ~ Bin(n, 1 − p), FN ~ Bin(n, 1 − p).
    fp, fn = rng.binomial(n, 1 - p, reps), rng.binomial(n, 1 - p, reps)
    level = emp.limit_level(confidence)
    counts = emp.epsilon_from_rates(
        emp.clopper_pearson_upper(fp, n, level), emp.clopper_pearson_upper(fn, n, level), 0.0
    )
    one = emp.epsilon_lower_from_counts(int(fp[0]), int(fn[0]), n, n, 0.0, confidence)
    assert one.epsilon_lower == pytest.approx(counts[0])
    assert np.mean(counts > epsilon + 1e-12) <= allowed(confidence, reps)
    # Sweeps on the raw bits.
    reps = 400
    pos = (rng.random((reps, n)) < p).astype(float)
    neg = (rng.random((reps, n)) < 1 - p).astype(float)
    for method in ("split", "bonferroni"):
        values = np.array([sweep(pos[r], neg[r], 0.0, confidence, method, r) for r in range(reps)])
        assert np.mean(values > epsilon + 1e-12) <= allowed(confidence, reps), method
    # GDP assumes a Gaussian trade-off, which randomised response does not have: at δ = 0 it claims ∞.
    assert math.isinf(gdp(pos[0], neg[0], 0.0, confidence, "midpoint", 0))
    assert aud.ASSUMPTIONS["gdp"].startswith("assumes a Gaussian trade-off")


def _subsampled_scores(
    rng: np.random.Generator, z: float, q: float, steps: int, shape: tuple[int, int], inn: bool
):
    """Optimal LR statistic Σ_t log(1 − q + q·exp((2x_t − 1)/(2z²))) of T Poisson-sampled Gaussian steps."""
    x = rng.normal(0.0, z, (*shape, steps))
    if inn:
        x += rng.random((*shape, steps)) < q
    return np.sum(np.log1p(q * np.expm1((2.0 * x - 1.0) / (2.0 * z * z))), axis=-1)


def test_poisson_subsampled_gaussian_family_bound_holds_its_level():
    # Weak noise per step but a large sampling rate keeps each PLD curve cheap (~0.05 s). The true ε is
    # dp_accounting's PLD refined until two grids agree within 0.05 % (epsilon_pld; at a fixed 1e-5
    # grid, 10 s, it is 2.68238 as well).
    z, q, steps, delta = 2.0, 0.5, 10, 1e-3
    true_eps = epsilon_pld(z, q, steps, delta)
    mechanism = SubsampledGaussian(q, steps, rtol=0.05)  # a 5 % z grid: repeats share cached curves
    reps, n, confidence = 30, 2000, 0.8
    rng = np.random.default_rng(11)
    pos = _subsampled_scores(rng, z, q, steps, (reps, n), True)
    neg = _subsampled_scores(rng, z, q, steps, (reps, n), False)
    family = np.array(
        [
            aud.gdp_lower_bound(
                pos[r], neg[r], delta=delta, confidence=confidence, seed=r, mechanism=mechanism
            ).epsilon
            for r in range(reps)
        ]
    )
    assert np.mean(family > true_eps) <= allowed(confidence, reps)
    assert np.mean(family) > 0.3 * true_eps  # informative, not vacuous
    for method in ("split", "bonferroni"):
        values = np.array([sweep(pos[r], neg[r], delta, confidence, method, r) for r in range(reps)])
        assert np.mean(values > true_eps) <= allowed(confidence, reps), method


def test_family_curve_lies_below_the_point_of_an_exact_test():
    # The NP test at a threshold of the true LR statistic achieves (α, β) on the mechanism's curve; the
    # pessimistic-PLD curve must not rule that point out at the true z, and must at a larger z.
    z, q, steps = 1.0, 0.1, 20
    mechanism = SubsampledGaussian(q, steps)
    rng = np.random.default_rng(3)
    pos = _subsampled_scores(rng, z, q, steps, (1, 200_000), True)[0]
    neg = _subsampled_scores(rng, z, q, steps, (1, 200_000), False)[0]
    for threshold in np.quantile(neg, [0.5, 0.9, 0.99]):
        alpha, beta = float(np.mean(neg >= threshold)), float(np.mean(pos < threshold))
        assert not mechanism.rules_out(alpha + 0.005, beta + 0.005, z)
    assert mechanism.rules_out(0.01, 0.5, 3.0 * z)
    # q = 1 is the Gaussian mechanism: the curve is Φ(Φ⁻¹(1 − α) − √T/z).
    full = SubsampledGaussian(1.0, 4)
    assert full.tradeoff(0.1, 2.0) == pytest.approx(gaussian_tradeoff(0.1, 1.0))


def test_gdp_inversion_is_exact_on_the_gaussian_curve():
    alpha = np.array([0.01, 0.2, 0.5])
    beta = gaussian_tradeoff(alpha, 1.3)
    assert gdp_mu_lower(alpha, beta) == pytest.approx(np.full(3, 1.3))
    assert gdp_mu_lower(0.6, 0.6) == 0.0 and gdp_mu_lower(1.0, 0.1) == 0.0


@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_one_run_bound_holds_its_level(confidence):
    # m canaries, each included with probability 1/2; the released scores are N(μ·included, 1), a
    # μ-GDP mechanism per canary, so the true per-canary ε(δ) is the analytic Gaussian curve.
    mu, delta, m, reps = 2.0, 1e-4, 1000, 150
    true_eps = gaussian_epsilon(mu, delta)
    rng = np.random.default_rng(21)
    included = rng.random((reps, m)) < 0.5
    scores = rng.normal(0.0, 1.0, (reps, m)) + mu * included
    values = np.array(
        [
            aud.one_run_lower_bound(
                scores[r], included[r], k_positive=50, k_negative=50, delta=delta, confidence=confidence
            ).epsilon
            for r in range(reps)
        ]
    )
    assert np.mean(values > true_eps) <= allowed(confidence, reps)
    assert np.mean(values) > 0.25 * true_eps


def test_one_run_p_value_pure_dp_is_a_binomial_tail():
    from scipy.stats import binom

    p = math.exp(1.0) / (1 + math.exp(1.0))
    assert aud.one_run_p_value(100, 80, 1.0, 0.0, 1000)[0] == pytest.approx(binom.sf(79, 100, p))
    assert aud.one_run_p_value(100, 80, 1.0, 1e-3, 1000)[0] > aud.one_run_p_value(100, 80, 1.0, 0.0, 1000)[0]


def test_null_scores_every_estimator_gives_zero():
    reps, n, delta = 200, 500, 1e-3
    rng = np.random.default_rng(31)
    pos, neg = rng.normal(size=(reps, n)), rng.normal(size=(reps, n))
    mechanism = SubsampledGaussian(0.1, 10)
    zero = {name: 0 for name in ("sweep_split", "sweep_bonferroni", "gdp", "subsampled_gaussian", "one_run")}
    for r in range(reps):
        audit = aud.audit_scores(
            pos[r], neg[r], delta=delta, seed=r, mechanism=mechanism if r < 40 else None, one_run=True
        )
        for name, bound in audit.lower_bounds.items():
            if name in zero:
                zero[name] += bound.epsilon == 0.0
    for name, count in zero.items():
        total = 40 if name == "subsampled_gaussian" else reps
        assert count / total >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / total), name


def test_audit_metrics_are_flat_finite_and_named():
    rng = np.random.default_rng(41)
    audit = aud.audit_scores(rng.normal(3.0, 1.0, 300), rng.normal(0.0, 1.0, 300), delta=0.0)
    metrics = audit.metrics()
    assert all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())
    assert metrics["epsilon_lower_gdp"] == 1e308  # μ-GDP with μ > 0 is not pure DP: ∞, capped
    assert metrics["gdp_counted"] == 0.0  # nobody declared a Gaussian mechanism
    assert "epsilon_estimate_sweep_naive" in metrics and "epsilon_lower_sweep_naive" not in metrics
    for key in ("tpr_at_fpr_0p01", "tpr_at_fpr_0p01_low", "auroc_high", "advantage_low"):
        assert key in metrics
    assert not any("95" in key or "joint" in key for key in metrics)  # stable names: no level inside
    assert metrics["auroc_low"] <= metrics["auroc"] <= metrics["auroc_high"]
    assert metrics["advantage_low"] <= metrics["advantage"] <= metrics["advantage_high"]
    best = audit.best_valid()
    assert best.estimator.startswith("sweep_") and best.confidence == 0.95
    assert metrics["epsilon_lower"] == best.epsilon < 1e308
    # Each of the two counted sweeps holds alone at 1 − 0.05/2: their maximum at 0.95.
    assert metrics["sweep_split_confidence"] == pytest.approx(0.975)
    assert audit.lower_bounds["gdp"].confidence == 0.95
    assert not audit.lower_bounds["sweep_naive"].valid


def test_headline_counts_only_declared_assumptions():
    rng = np.random.default_rng(42)
    pos, neg = rng.normal(2.0, 1.0, 500), rng.normal(0.0, 1.0, 500)
    plain = aud.audit_scores(pos, neg, delta=1e-5)
    assert set(plain.counted_bounds()) == set(aud.ASSUMPTION_FREE)
    gaussian = aud.audit_scores(pos, neg, delta=1e-5, assume_gaussian=True)
    assert set(gaussian.counted_bounds()) == {"sweep_split", "sweep_bonferroni", "gdp"}
    assert gaussian.lower_bounds["gdp"].confidence == pytest.approx(1 - 0.05 / 3)
    assert gaussian.headline.estimator == "gdp" and gaussian.headline.confidence == 0.95
    # Pre-registering one estimator keeps the whole level for it.
    one = aud.audit_scores(pos, neg, delta=1e-5, assume_gaussian=True, headline=("gdp",))
    assert one.headline.epsilon == one.lower_bounds["gdp"].epsilon > gaussian.headline.epsilon
    with pytest.raises(ValueError, match="assume_gaussian"):
        aud.audit_scores(pos, neg, delta=1e-5, headline=("gdp",))
    with pytest.raises(ValueError, match="not a valid bound"):
        aud.audit_scores(pos, neg, delta=1e-5, headline=("sweep_naive",))


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_randomised_response_headline_holds_its_level(delta):
    # ε = 1 randomised response: the GDP estimator reads ∞ (δ = 0) or ≈ 4.6 on these scores, and
    # must not reach the headline; the headline must exceed 1 in at most 5 % of repeats.
    reps, n, eps = 60, 1000, 1.0
    p = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(43)
    over = 0
    for r in range(reps):
        pos = (rng.random(n) < p).astype(float)
        neg = (rng.random(n) >= p).astype(float)
        audit = aud.audit_scores(pos, neg, delta=delta, seed=r)
        over += audit.headline.epsilon > eps
        assert audit.lower_bounds["gdp"].epsilon > eps  # what a GDP headline would have claimed
    assert over / reps <= allowed(0.95, reps)


def test_one_run_bound_is_a_function_of_the_multiset():
    # Randomised response at ε = 1: scores are 0/1, so ties are everywhere. Listing the excluded
    # canaries first made the old stable sort guess "in" exactly for included ones.
    rng = np.random.default_rng(44)
    m = 1000
    p = math.e / (1 + math.e)
    included = rng.random(m) < 0.5
    scores = (included ^ (rng.random(m) >= p)).astype(float)
    kwargs = {"k_positive": 100, "k_negative": 100, "delta": 0.0, "seed": 7}
    reference = aud.one_run_lower_bound(scores, included, **kwargs)
    for _ in range(20):
        order = rng.permutation(m)
        assert aud.one_run_lower_bound(scores[order], included[order], **kwargs) == reference
    excluded_first = np.argsort(included, kind="stable")
    assert aud.one_run_lower_bound(scores[excluded_first], included[excluded_first], **kwargs) == reference
    assert reference.epsilon < 1.0


def test_one_run_headline_with_an_odd_number_of_scores():
    # The fraction 1.0 guesses on every canary: k₊ = k₋ = ⌊m/2⌋ when m is odd (it once asked for m + 1).
    rng = np.random.default_rng(46)
    pos, neg = rng.normal(3.0, 1.0, 301), rng.normal(0.0, 1.0, 300)
    audit = aud.audit_scores(pos, neg, delta=1e-5, one_run=True, one_run_fractions=(1.0,))
    bound = audit.lower_bounds["one_run"]
    assert bound.details["guesses"] == 600
    assert bound.details["correct"] > 550
    assert bound.epsilon > 1.0


@pytest.mark.parametrize("m", [1000, 10_000])
def test_one_run_randomised_response_holds_its_level(m):
    reps, eps = 40, 1.0
    p = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(45 + m)
    over = 0
    for r in range(reps):
        included = rng.random(m) < 0.5
        scores = (included ^ (rng.random(m) >= p)).astype(float)
        order = np.argsort(included, kind="stable")  # adversarial order: excluded first
        k = m // 10
        bound = aud.one_run_lower_bound(
            scores[order], included[order], k_positive=k, k_negative=k, delta=0.0, seed=r
        )
        over += bound.epsilon > eps
    assert over / reps <= allowed(0.95, reps)


def test_auroc_and_advantage_intervals_cover():
    # AUROC of N(1, 1) vs N(0, 1) is Φ(1/√2); the max advantage is 2Φ(1/2) − 1.
    from scipy.stats import norm

    reps, n = 200, 300
    rng = np.random.default_rng(51)
    pos, neg = rng.normal(1.0, 1.0, (reps, n)), rng.normal(0.0, 1.0, (reps, n))
    auc_true, adv_true = norm.cdf(1 / math.sqrt(2)), 2 * norm.cdf(0.5) - 1
    cover_auc = cover_adv = 0
    for r in range(reps):
        audit = aud.audit_scores(pos[r], neg[r], delta=1e-3, seed=r)
        cover_auc += audit.auroc[1] <= auc_true <= audit.auroc[2]
        cover_adv += audit.advantage[1] <= adv_true <= audit.advantage[2]
    assert cover_auc / reps >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / reps)
    assert cover_adv / reps >= 0.95  # DKW is conservative


def test_bad_inputs():
    with pytest.raises(ValueError, match="in_scores"):
        aud.audit_scores([1.0, np.nan], [0.0, 1.0], delta=1e-3)
    with pytest.raises(ValueError, match="fpr_levels"):
        aud.audit_scores([1.0, 2.0], [0.0, 1.0], delta=1e-3, fpr_levels=(0.0,))
    with pytest.raises(ValueError, match="selection"):
        aud.gdp_lower_bound([1.0, 2.0], [0.0, 1.0], delta=1e-3, selection="best")
    with pytest.raises(ValueError, match="included"):
        aud.one_run_lower_bound([1.0, 2.0], [True], k_positive=1, k_negative=0, delta=0.0)
    with pytest.raises(ValueError, match="sampling_rate"):
        SubsampledGaussian(0.0, 10)


def test_advantage_uses_the_sweeps_counts_with_unchanged_values():
    """The advantage's threshold sweep is :func:`dpaudit.bounds.empirical.threshold_counts` (the one the
    ε sweeps use), and its value is bit-for-bit the direct empirical-CDF formula (ties included)."""
    import math

    import numpy as np

    from dpaudit.bounds.empirical import threshold_counts
    from dpaudit.bounds.strength import advantage_interval

    rng = np.random.default_rng(3)
    pos, neg = np.round(rng.normal(0.4, 1, 301), 1), np.round(rng.normal(0, 1, 157), 1)
    ps, ns = np.sort(pos), np.sort(neg)
    thresholds = np.concatenate([np.unique(np.concatenate([ps, ns])), [math.inf]])
    tpr = 1.0 - np.searchsorted(ps, thresholds, side="left") / ps.size
    fpr = 1.0 - np.searchsorted(ns, thresholds, side="left") / ns.size
    assert advantage_interval(pos, neg, 0.95)[0] == float(np.max(tpr - fpr))
    fp, fn = threshold_counts(ps, ns, thresholds)
    assert np.array_equal(fp, [np.sum(neg >= t) for t in thresholds])
    assert np.array_equal(fn, [np.sum(pos < t) for t in thresholds])


def test_one_run_scores_headline_the_one_run_bound_alone():
    rng = np.random.default_rng(47)
    pos, neg = rng.normal(3.0, 1.0, 500), rng.normal(0.0, 1.0, 500)
    audit = aud.audit_scores(pos, neg, delta=1e-5, one_run=True)
    assert audit.headline.estimator == "one_run"
    assert audit.headline.details["counted_bounds"] == 1.0
    assert audit.lower_bounds["one_run"].confidence == 0.95
    for name in aud.ASSUMPTION_FREE:
        sweep = audit.lower_bounds[name]
        assert not sweep.valid and not sweep.counted and sweep.assumption == aud.SWEEP_ON_ONE_RUN
    with pytest.raises(ValueError, match="sweep_split.*one run"):
        aud.audit_scores(pos, neg, delta=1e-5, one_run=True, headline=("sweep_split",))
    independent = aud.audit_scores(pos, neg, delta=1e-5)
    assert independent.lower_bounds["sweep_split"].valid and independent.lower_bounds["sweep_split"].counted
