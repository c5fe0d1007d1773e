"""Tightness of the ε lower bounds on the identifiability audit (issue 10).

Setting: Bernau et al.'s identifiability audit with local sensitivity, full-batch DP-SGD for k = 30
steps at δ = 1e-3 (adult: δ = 1/|D|), noise z calibrated under RDP from ρβ (as
``experiments.identifiability.noise_multiplier_for`` does). With local sensitivity the DI
adversary's final log-odds of D are exactly N(+μ²/2, μ²) in world D and N(−μ²/2, μ²) in world D′,
μ = √k/z (the k steps compose to one Gaussian mechanism of sensitivity/σ = μ), so the scores are
drawn from that exact distribution here — not from the trainer. The mechanism's ε_PLD(δ) is the
exact analytic Gaussian value (PLD agrees with it for full batch; see test_accountants).

For each ρβ and trials-per-world n, ``--repeats`` independent audits give the ratio bound / ε_PLD
for the GDP bound (joint 95 %) and the split and Bonferroni sweeps (joint 95 %).

``--trainer`` instead trains the real models: ``dpaudit.training.dpsgd.train_trials`` with the DI
observer (as the identifiability experiment does), unbounded neighbours D′ = D minus x̂, local
sensitivity, an adult-sized MLP ([6, 6]) on synthetic features (200 records, 14 features), n trials
per world, one audit per ρβ, and the DI adversary's final log-odds (``di.run_di``) as scores.

    python benchmarks/bench_lower_bounds.py                     # the README table (simulated)
    python benchmarks/bench_lower_bounds.py --trainer --trials 1000
    python benchmarks/bench_lower_bounds.py --repeats 10 --out results.json
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from dpaudit.bounds.accountants import calibrate_noise_multiplier, epsilon_pld, gaussian_epsilon
from dpaudit.bounds.auditor import audit_scores
from dpaudit.bounds.identifiability import epsilon_from_rho_beta

STEPS = 30
DELTA = 1e-3
ESTIMATORS = ("gdp", "sweep_split", "sweep_bonferroni")


def log_odds(rng: np.random.Generator, mu: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Final log-odds of D in world D (in) and in world D′ (out): N(±μ²/2, μ²)."""
    half = mu * mu / 2.0
    return rng.normal(half, mu, n), rng.normal(-half, mu, n)


def run(rho_betas: list[float], sizes: list[int], repeats: int, seed: int) -> list[dict[str, float]]:
    rows = []
    for rho_beta in rho_betas:
        target = epsilon_from_rho_beta(rho_beta)
        z = calibrate_noise_multiplier(target, DELTA, 1.0, STEPS, "rdp")
        mu = math.sqrt(STEPS) / z
        exact = gaussian_epsilon(mu, DELTA)
        pld = epsilon_pld(z, 1.0, STEPS, DELTA)
        for n in sizes:
            ratios: dict[str, list[float]] = {name: [] for name in ESTIMATORS}
            start = time.perf_counter()
            for r in range(repeats):
                rng = np.random.default_rng([seed, int(rho_beta * 1000), n, r])
                pos, neg = log_odds(rng, mu, n)
                audit = audit_scores(pos, neg, delta=DELTA, confidence=0.95, seed=r)
                for name in ESTIMATORS:
                    ratios[name].append(audit.lower_bounds[name].epsilon / pld)
            seconds = (time.perf_counter() - start) / repeats
            row = {
                "rho_beta": rho_beta,
                "trials_per_world": n,
                "noise_multiplier": z,
                "mu": mu,
                "epsilon_rdp_target": target,
                "epsilon_pld": pld,
                "epsilon_exact": exact,
                "seconds_per_audit": seconds,
            }
            for name, values in ratios.items():
                row[f"{name}_mean"] = float(np.mean(values))
                row[f"{name}_median"] = float(np.median(values))
                row[f"{name}_min"] = float(np.min(values))
            rows.append(row)
            print(
                f"rho_beta={rho_beta:<5} n={n:<6} eps_pld={pld:.3f} "
                + " ".join(
                    f"{name}={row[f'{name}_mean']:.3f} (median {row[f'{name}_median']:.3f}, "
                    f"min {row[f'{name}_min']:.3f})"
                    for name in ESTIMATORS
                )
                + f"  {seconds * 1e3:.0f} ms/audit",
                flush=True,
            )
    return rows


def trainer_scores(rho_beta: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(in, out, z, seconds): DI log-odds of D from n trained models per world."""
    from dpaudit.attacks import di
    from dpaudit.training import dpsgd, models
    from dpaudit.training.dpsgd.difference import di_observer

    rng = np.random.default_rng(seed)
    records, features = 200, 14
    X = rng.normal(size=(records, features)).astype(np.float32)
    y = (X @ rng.normal(size=features) > 0).astype(np.int32)
    model = models.model_for_dataset("adult", (features,), 2, [6, 6])
    z = calibrate_noise_multiplier(epsilon_from_rho_beta(rho_beta), DELTA, 1.0, STEPS, "rdp")
    world = rng.permutation(np.repeat([0, 1], n))
    d_mask = np.ones(records, bool)
    d_prime = d_mask.copy()
    d_prime[0] = False  # unbounded: D′ = D without x̂ = row 0
    mask = np.where(world[:, None] == 1, d_mask[None, :], d_prime[None, :])
    cfg = dpsgd.DPSGDConfig(
        clip_norm=3.0,
        noise_multiplier=z,
        learning_rate=0.5,
        steps=STEPS,
        noise_scale="local",
        sensitivity_factor=1.0,
        normalizer=float(records),
    )
    start = time.perf_counter()
    res = dpsgd.train_trials(
        model,
        X,
        y,
        mask,
        cfg,
        seed=seed,
        tracked=dpsgd.TrackedRecords((0,), (1.0,)),
        observers={"di": di_observer()},
    )
    seconds = time.perf_counter() - start
    outcome = di.run_di(res.records["di.dot"], res.records["di.dd"], res.records["di.sigma"], world, rho_beta)
    final_d = np.where(world == 1, outcome.final_true_log_odds, -outcome.final_true_log_odds)
    return final_d[world == 1], final_d[world == 0], z, seconds


def run_trainer(rho_betas: list[float], n: int, seed: int) -> list[dict[str, float]]:
    rows = []
    for rho_beta in rho_betas:
        pos, neg, z, seconds = trainer_scores(rho_beta, n, seed)
        pld = epsilon_pld(z, 1.0, STEPS, DELTA)
        audit = audit_scores(pos, neg, delta=DELTA, confidence=0.95, seed=seed)
        row = {"rho_beta": rho_beta, "trials_per_world": n, "epsilon_pld": pld, "train_seconds": seconds}
        mu = math.sqrt(STEPS) / z
        # With local sensitivity the log-odds in world D are N(μ²/2, μ²): check the trainer agrees.
        row["log_odds_mean_over_expected"] = float(np.mean(pos) / (mu * mu / 2.0))
        row["log_odds_std_over_expected"] = float(np.std(pos) / mu)
        for name in ESTIMATORS:
            row[name] = audit.lower_bounds[name].epsilon / pld
        rows.append(row)
        print(
            f"trainer rho_beta={rho_beta:<5} n={n} eps_pld={pld:.3f} "
            + " ".join(f"{name}={row[name]:.3f}" for name in ESTIMATORS)
            + f"  log-odds mean/expected {row['log_odds_mean_over_expected']:.3f}, "
            f"std/expected {row['log_odds_std_over_expected']:.3f}  train {seconds:.1f} s",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rho-beta", type=float, nargs="+", default=[0.75, 0.9, 0.99])
    parser.add_argument("--trials", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    parser.add_argument("--trainer", action="store_true", help="train real models (first --trials value)")
    args = parser.parse_args()
    if args.trainer:
        rows = run_trainer(args.rho_beta, args.trials[0], args.seed)
    else:
        rows = run(args.rho_beta, args.trials, args.repeats, args.seed)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
