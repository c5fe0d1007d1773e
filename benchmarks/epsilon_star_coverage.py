"""Is Epsilon*'s bootstrap percentile interval a confidence interval? And is its null level calibrated?

Setting: member losses N(0, 1), non-member losses N(μ, 1), n of each, δ = 1/(n ln n) (Negoescu et
al. §4). The population Epsilon* (Def. 2, with the estimator's band: (δ, 1 − δ) for the parametric
estimator, (0.001, 0.999) for the empirical one) is computed in closed form on a dense threshold
grid from the two normal CDFs; App. B's logit transform is increasing, so thresholds on the raw
losses give the same supremum. μ = 0 is the null (population value 0).

Per setting, ``--repeats`` fresh samples each get :func:`dpaudit.bounds.epsilon_star.epsilon_star_with_null`
(``--bootstrap`` resamples, 100 label permutations). Columns:

* ``population``: the Def. 2 value; ``at 10^6``: the estimator on one sample of 10^6 per side (what
  it converges to: the parametric fit after the logit transform is misspecified for normal losses);
* ``mean est``: the mean estimate; ``coverage``: share of percentile intervals at 95 % that contain
  the population value (a confidence interval needs ≥ 93 %);
* ``null mean`` / ``null q95``: mean permutation null level; ``above null``: share of samples whose
  value exceeds its null 95th percentile (on the null it is the false-alarm rate, ≈ 5 % if calibrated).

    python benchmarks/epsilon_star_coverage.py            # the table in benchmarks/README.md
    python benchmarks/epsilon_star_coverage.py --quick    # n = 200 only, 20 repeats, 50 resamples
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import norm

from dpaudit.bounds.epsilon_star import (
    EMPIRICAL_RATE_FLOOR,
    default_delta,
    epsilon_star_empirical,
    epsilon_star_from_rates,
    epsilon_star_parametric,
    epsilon_star_with_null,
)

METHODS = ("parametric", "empirical")
SHIFTS = (0.0, 0.5, 1.0)
LEVEL = 0.95


def population_epsilon_star(mu: float, delta: float, band: float) -> float:
    """Def. 2 for members N(0, 1), non-members N(μ, 1), "member if loss ≤ τ", thresholds with both
    rates inside (band, 1 − band): a dense grid of 400 001 thresholds on [−12, 12 + μ]."""
    s = np.linspace(-12.0, 12.0 + mu, 400_001)
    t, eta = norm.cdf(s, mu, 1.0), norm.sf(s, 0.0, 1.0)
    return float(epsilon_star_from_rates(t, eta, delta, band=band).max())


def run(ns: list[int], repeats: int, bootstrap: int, seed: int) -> list[dict[str, float | str]]:
    rows: list[dict[str, float | str]] = []
    rng = np.random.default_rng(seed)
    for method in METHODS:
        for n in ns:
            delta = default_delta(n)
            band = delta if method == "parametric" else EMPIRICAL_RATE_FLOOR
            for mu in SHIFTS:
                population = population_epsilon_star(mu, delta, band)
                big = rng.normal(size=1_000_000), rng.normal(mu, 1.0, size=1_000_000)
                limit = (epsilon_star_parametric if method == "parametric" else epsilon_star_empirical)(
                    *big, delta
                ).epsilon_star
                values, covered, null_mean, null_high, above = [], [], [], [], []
                start = time.perf_counter()
                for r in range(repeats):
                    m, nm = rng.normal(size=n), rng.normal(mu, 1.0, size=n)
                    star = epsilon_star_with_null(
                        m, nm, delta, method=method, n_bootstrap=bootstrap, spread_level=LEVEL, seed=seed + r
                    )
                    values.append(star.epsilon_star)
                    covered.append(star.spread_low <= population <= star.spread_high)
                    null_mean.append(star.null_mean)
                    null_high.append(star.null_high)
                    above.append(star.above_null)
                rows.append(
                    {
                        "method": method,
                        "n": n,
                        "mu": mu,
                        "population": population,
                        "limit": limit,
                        "mean": float(np.mean(values)),
                        "coverage": float(np.mean(covered)),
                        "null_mean": float(np.mean(null_mean)),
                        "null_high": float(np.mean(null_high)),
                        "above_null": float(np.mean(above)),
                        "seconds": (time.perf_counter() - start) / repeats,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 200 only, 20 repeats, 50 resamples")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--n", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ns, repeats, bootstrap = (args.n, args.repeats, args.bootstrap) if not args.quick else ([200], 20, 50)
    rows = run(ns, repeats, bootstrap, args.seed)
    print(f"{repeats} repeats, {bootstrap} bootstrap resamples, 100 permutations, nominal {LEVEL:.0%}\n")
    print(
        "| method | n | μ | population | at 10^6 | mean est | coverage | null mean | null q95 | above null "
        "| s/value |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['method']} | {r['n']} | {r['mu']:g} | {r['population']:.3f} | {r['limit']:.3f} | "
            f"{r['mean']:.3f} | {100 * r['coverage']:.0f} % | {r['null_mean']:.3f} | {r['null_high']:.3f} | "
            f"{100 * r['above_null']:.0f} % | {r['seconds']:.2f} |"
        )


if __name__ == "__main__":
    main()
