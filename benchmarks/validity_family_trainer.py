"""Validity of the instantiation audit's headline on the REAL trainer: how often does adult F's family bound
overclaim?

``validity_stepwise.py`` checks the per-step family bound's level on the family's idealised law. This
script checks it where the headline comes from: the adult instantiation audit, threat model F (the
summary's strongest threat model), at the default pipeline configuration (``params.yaml``: ε = 2 at
δ = 1e-5, q = 0.1, T = 100, C = 1, 2n = 2, ``malicious_trials_per_world`` per world, 95 % joint), run
through the library's own stages (:func:`dpaudit.pipeline.run_train`, ``run_losses``, ``run_attack``,
``run_bounds``, via ``bench_time_to_proof.py``'s runner) for many independent training seeds. The
mechanism's true ε is at most ε_PLD, so every audit whose headline ``epsilon_lower_family`` exceeds ε_PLD
overclaims for certain; the bound's own event is z_UB < z (its upper limit on the noise multiplier
below the true one). Both rates should be at most 1 − confidence = 5 %; each is reported with its
Monte Carlo standard error and a one-sided binomial p-value against 5 %.

Beside the rates, each audit's per-step projections (``F-eps2.npz``'s ``dots``) give the law the bound
assumes, step by step: world D's mean (0: the canary's coordinates get no data gradient) and spread
(σ = z·C), world D′'s mean (q·C) — each as a standardised deviation, which is N(0, 1) across seeds
when the trainer follows the family — and the lag-1 correlation of the steps (0).

    python benchmarks/validity_family_trainer.py [--quick] [--seeds 200] [--out results.json]

``--quick`` runs 20 seeds. Rows are appended to ``--jsonl`` as they finish (resumable with ``--first``).
``--play-only`` runs F's play alone (the train stage's own F cell: same game, seeds, worlds, malicious
dataset, canary and trainer call) and the family bound on its projections, skipping the later stages
(about 3× as many audits an hour); its headline is that bound.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("DPAUDIT_PROGRESS", "0")

import numpy as np
import yaml
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_time_to_proof import ROOT, audit_params, prepare, run_audit, workloads
from dpaudit import pipeline
from dpaudit.bounds.accountants import calibrate_noise_multiplier, epsilon_pld
from dpaudit.bounds.stepwise import StepMoments, stepwise_family_bound
from dpaudit.bounds.tradeoff import SubsampledGaussian


def law_diagnostics(
    dots: np.ndarray, inserted: np.ndarray, z: float, q: float, clip: float
) -> dict[str, float]:
    """Standardised deviations of one audit's per-step projections from the family's law: world D's
    mean from 0 and its variance from σ² = (zC)², world D′'s mean from q·C, and the lag-1 correlation
    of consecutive steps (each ≈ N(0, 1) under the family, the correlation's in units of 1/√n)."""
    d0, d1 = dots[inserted == 0], dots[inserted == 1]
    sigma = z * clip
    m0, m1 = d0.size, d1.size
    var1 = sigma**2 + q * (1 - q) * clip**2
    # Centred per world: the worlds' different means would otherwise correlate every pair of steps.
    centred = np.where((inserted == 1)[:, None], dots - d1.mean(), dots - d0.mean())
    lag = np.corrcoef(centred[:, :-1].ravel(), centred[:, 1:].ravel())[0, 1]
    return {
        "d_mean_z": float(d0.mean() / (sigma / math.sqrt(m0))),
        "d_var_z": float((d0.var() / sigma**2 - 1.0) / math.sqrt(2.0 / m0)),
        "dprime_mean_z": float((d1.mean() - q * clip) / math.sqrt(var1 / m1)),
        "lag1_corr_z": float(lag * math.sqrt(dots[:, 1:].size)),
        "sigma_hat_over_sigma": float(d0.std() / sigma),
    }


def one_seed(root: Path, base: dict[str, Any], trials: int, seed: int, confidence: float) -> dict[str, Any]:
    """One default-configuration adult F audit at training seed ``seed``: the pipeline's headline and
    ε_PLD; F's per-step family bound recomputed from the train stage's projections at ``confidence``
    (its z_UB, which the results need not carry) beside the true z; the law diagnostics."""
    w = workloads(False)["adult-F"]
    t0 = time.perf_counter()
    row = run_audit(root, base, w, trials, seed)
    p = audit_params(base, w, trials, seed)
    audit = pipeline.audit_from_params(p, f"{w.dataset}-{w.experiment}", root)
    manifest = json.loads((audit.train_dir / "manifest.json").read_text())
    with np.load(audit.train_dir / "F-eps2.npz") as f:
        dots, inserted = f["dots"], f["inserted"]
        zero_mass = float(f["data_mass_at_canary"]) == 0.0
    z = float(manifest["mechanisms"]["eps2"]["noise_multiplier"])
    row.update(family_row(dots, inserted, zero_mass, z, p["instantiation"]["train"], confidence))
    row["seconds"] = time.perf_counter() - t0
    return row


def family_row(
    dots: np.ndarray,
    inserted: np.ndarray,
    zero_mass: bool,
    z: float,
    train: dict[str, Any],
    confidence: float,
) -> dict[str, Any]:
    """F's per-step family bound from the projections ``dots`` at ``confidence`` (z_UB and ε_LB), the
    true z, and the law diagnostics."""
    q, clip = float(train["sampling_rate"]), float(train["clip_norm"])
    bound = stepwise_family_bound(
        StepMoments.of(dots[inserted == 1]), StepMoments.of(dots[inserted == 0]),
        SubsampledGaussian(q, dots.shape[1], rtol=0.03, epsilon_discretization=1e-4),
        delta=float(train["delta"]), confidence=confidence, known_baseline=0.0 if zero_mass else None,
    )  # fmt: skip
    return {
        "noise_multiplier": z,
        "noise_multiplier_upper": bound.noise_multiplier_upper,
        "epsilon_lower_stepwise": bound.epsilon,
        "epsilon_estimate": bound.epsilon_estimate,
        "known_baseline": float(zero_mass),
        **law_diagnostics(dots, inserted, z, q, clip),
    }


class Player:
    """F's play alone (``--play-only``): the pipeline's own F cell (the same game, seed, worlds,
    malicious dataset, canary and trainer call as its train stage), without the later stages; the
    headline is then the per-step family bound itself."""

    def __init__(self, root: Path, base: dict[str, Any], trials: int) -> None:
        from dpaudit.experiments.instantiation.train import build_game

        w = workloads(False)["adult-F"]
        self.params = audit_params(base, w, trials)
        prepare(root, self.params, w)
        audit, _, config = pipeline.load_audit(self.params, f"{w.dataset}-{w.experiment}", root)
        self.game, self.dataset, self.trials = build_game(config, audit), audit.dataset, trials
        tp = config.train
        self.z = calibrate_noise_multiplier(
            2.0, tp.delta, tp.sampling_rate, tp.steps, tp.calibration_accountant
        )
        self.epsilon_pld = epsilon_pld(self.z, tp.sampling_rate, tp.steps, tp.delta)
        self.tp = tp

    def row(self, seed: int, confidence: float) -> dict[str, Any]:
        from dpaudit.experiments.instantiation.design import balanced_inserted
        from dpaudit.experiments.instantiation.design.crafters.canary import play_malicious_dataset
        from dpaudit.experiments.instantiation.train import cell_seed

        t0 = time.perf_counter()
        cs = cell_seed(seed, self.dataset, "F", 2.0)
        inserted = balanced_inserted(self.trials, [cs, 1])
        view = play_malicious_dataset(
            self.game, self.z, inserted, cs,
            dataset_size=self.tp.malicious_size, canary_size=self.tp.malicious_canary_size,
        )  # fmt: skip
        trainer_s = time.perf_counter() - t0
        row = family_row(view["dots"], inserted, float(view["data_mass_at_canary"]) == 0.0, self.z,
                         self.params["instantiation"]["train"], confidence)  # fmt: skip
        lower = row["epsilon_lower_stepwise"]
        row.update(
            trials_per_world=self.trials, seed=seed, epsilon_lower=lower, epsilon_pld=self.epsilon_pld,
            ratio=lower / self.epsilon_pld, trainer_s=trainer_s, seconds=time.perf_counter() - t0,
        )  # fmt: skip
        return row


def rate(count: int, n: int, level: float) -> dict[str, float]:
    """A rate with its Monte Carlo standard error and the one-sided binomial p-value of ≥ ``count``
    events in ``n`` at rate ``level``."""
    p = count / n if n else math.nan
    return {
        "count": count,
        "n": n,
        "rate": p,
        "mc_se": math.sqrt(max(p * (1 - p), level * (1 - level)) / n) if n else math.nan,
        "p_value_vs_level": float(stats.binom.sf(count - 1, n, level)) if n else math.nan,
    }


def summarise(rows: list[dict[str, Any]], confidence: float) -> dict[str, Any]:
    """Overclaim and coverage-miss rates against 1 − confidence, and the diagnostics across seeds."""
    level = 1.0 - confidence
    n = len(rows)
    out: dict[str, Any] = {
        "audits": n,
        "stated_level": level,
        "epsilon_lower_above_pld": rate(sum(r["epsilon_lower"] > r["epsilon_pld"] for r in rows), n, level),
        "stepwise_above_pld": rate(
            sum(r["epsilon_lower_stepwise"] > r["epsilon_pld"] for r in rows), n, level
        ),
        "z_upper_below_z": rate(
            sum(r["noise_multiplier_upper"] < r["noise_multiplier"] for r in rows), n, level
        ),
        "mean_ratio": float(np.mean([r["ratio"] for r in rows])),
    }
    for key in ("d_mean_z", "d_var_z", "dprime_mean_z", "lag1_corr_z"):
        v = np.array([r[key] for r in rows])
        # Under the family each is ≈ N(0, 1) across independent seeds.
        out[key] = {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if n > 1 else math.nan,
                    "mean_se": 1.0 / math.sqrt(n)}  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="20 seeds")
    parser.add_argument("--seeds", type=int, default=200, help="independent audits (training seeds)")
    parser.add_argument("--first", type=int, default=0, help="first training seed")
    parser.add_argument("--trials", type=int, default=None, help="F trials per world (default: params.yaml)")
    parser.add_argument(
        "--play-only", action="store_true", help="F's play and the family bound only (no later stages)"
    )
    parser.add_argument("--jsonl", type=Path, default=None, help="append each audit's row here")
    parser.add_argument("--out", type=Path, default=None, help="write the summary and rows as JSON here")
    args = parser.parse_args()
    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    trials = args.trials or int(base["instantiation"]["train"]["malicious_trials_per_world"])
    confidence = float(base["instantiation"]["bounds"]["confidence"])
    seeds = range(args.first, args.first + (20 if args.quick else args.seeds))
    scratch = Path(tempfile.mkdtemp(prefix="dpaudit-validity-f-"))
    print(
        f"{trials} F trials per world, seeds {seeds.start}..{seeds.stop - 1}; load {os.getloadavg()}",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    player = Player(scratch, base, trials) if args.play_only else None
    try:
        for seed in seeds:
            if player is not None:
                row = player.row(seed, confidence)
            else:
                row = one_seed(scratch, base, trials, seed, confidence)
            rows.append(row)
            line = json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})
            print(line, flush=True)
            if args.jsonl:
                with args.jsonl.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = {"trials_per_world": trials, "summary": summarise(rows, confidence), "rows": rows,
              "load_average_end": os.getloadavg()}  # fmt: skip
    print(json.dumps(result["summary"], indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
