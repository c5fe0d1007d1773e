"""The training audit's power line checked on real Keras training: is the stated ε reached?

The catalogue's correct hand-written DP-SGD step (``bug_catalogue.common.DPSGDModel``, Poisson batches,
claim ε = 2 at δ = 1e-5) on digits with ``--columns`` audit-only input columns appended (always zero in
the data, so the auditor finds them inert: the documented remedy that gives the canaries room). One
audited run at the declared σ gives the statement "the bound exceeds the claim with 80 % power from
true ε ≥ X"; then ``--runs`` fresh runs (other seeds) whose code adds noise σ' = the PLD σ of X are
audited as declared, and the share whose verdict bound exceeds the claim is printed with its
Clopper–Pearson 95 % interval. Calibrated means that share lies in 70–90 %.

    python benchmarks/power_keras.py                 # 256 columns, 10 epochs, 20 runs (~20 min, 1 core)

Results: benchmarks/README.md ("Power of the one-run verdict").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binomtest

from dpaudit.logs import progress

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bug_catalogue import common


def audited_run(seed: int, sigma: float, columns: int, epochs: int, canaries: int) -> Any:
    """One audited training run whose code adds noise ``sigma``·C (the declaration keeps its σ)."""
    import tensorflow as tf

    x, y = common.digits()
    x = np.concatenate([x, np.zeros((len(x), columns), x.dtype)], axis=1)
    tf.keras.utils.set_random_seed(seed)
    inputs = tf.keras.Input((x.shape[1],))
    hidden = tf.keras.layers.Dense(64, activation="relu")(inputs)
    hidden = tf.keras.layers.Dense(64, activation="relu")(hidden)
    model = common.DPSGDModel(inputs=inputs, outputs=tf.keras.layers.Dense(10)(hidden))
    model = common.compile_dp(model, sigma)
    train_ds = common.poisson_batches(x, y, common.SAMPLING_RATE, common.STEPS_PER_EPOCH, seed)
    audit = common.declared_audit(seed, epochs, canaries, sampling="poisson")
    model.fit(audit.wrap(train_ds), epochs=epochs, verbose=0, callbacks=[audit.callback()])
    verdict = audit.verdict()
    tf.keras.backend.clear_session()
    return verdict


def main() -> None:
    from dpaudit.training.accounting import calibrate_noise_multiplier

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", type=int, default=256, help="audit-only input columns appended")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--canaries", type=int, default=500)
    parser.add_argument("--runs", type=int, default=20, help="fresh runs at the stated ε")
    parser.add_argument("--seed", type=int, default=0, help="seed of the stating run (the others: 100 on)")
    args = parser.parse_args()
    start = time.perf_counter()
    declared_sigma = common.declared_sigma()
    stating = audited_run(args.seed, declared_sigma, args.columns, args.epochs, args.canaries)
    stated = stating.detectable_epsilon
    print(json.dumps({"stated_epsilon": stated, "claim": stating.claimed_epsilon}), flush=True)
    if not math.isfinite(stated):
        print("the statement is 'cannot prove a violation': nothing to calibrate in this setting")
        return
    steps = args.epochs * common.STEPS_PER_EPOCH
    sigma = calibrate_noise_multiplier(stated, common.DELTA, common.SAMPLING_RATE, steps, accountant="pld")
    above = 0
    for r in progress(range(args.runs), desc="runs at the stated ε", unit="run"):
        verdict = audited_run(100 + r, sigma, args.columns, args.epochs, args.canaries)
        above += verdict.epsilon_lower > verdict.claimed_epsilon
        print(json.dumps({"seed": 100 + r, "epsilon_lower": verdict.epsilon_lower, "status": verdict.status}))
    interval = binomtest(above, args.runs).proportion_ci(0.95, method="exact")
    print(
        f"{above} / {args.runs} runs above the claim at the stated ε {stated:.3g} (σ' = {sigma:.4g}); "
        f"95 % CI [{interval.low:.2f}, {interval.high:.2f}]; {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
