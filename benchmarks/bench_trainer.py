"""Trials-at-once DP-SGD trainer vs a one-trial-at-a-time loop on TF Privacy's optimizer.

Setting (issue 4): adult, |D| = 1000, full batch, k = 30 steps, clip C = 3, the noise of
ρβ = 0.9 (z from ε = ln 9 by RDP, q = 1, δ = 1/|D|). The trials-at-once side is the
identifiability audit's real work: bounded neighbours, local-sensitivity noise, the DI observer.
The loop side trains one Keras model per trial with ``DPKerasSGDOptimizer`` (one microbatch per
example, global noise z·C) and nothing else, so the comparison favours the loop. The loop is
timed on a few trials after one warm-up step and extrapolated (its per-trial cost is constant).

    .venv/bin/python benchmarks/bench_trainer.py [--prepared data/prepared/adult.npz] [--trials 1000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("DPAUDIT_PROGRESS", "0")

import numpy as np
import tensorflow as tf

from dpaudit.bounds.accountants import calibrate_noise_multiplier
from dpaudit.data.prepared import PreparedData
from dpaudit.training import dpsgd, models
from dpaudit.training.dpsgd.difference import di_observer

STEPS, CLIP, LR = 30, 3.0, 0.005


def adult_data(path: Path | None, n: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """D of the prepared adult data, or (without it) a synthetic stand-in of the same shape."""
    if path is not None and path.exists():
        X, y = PreparedData.load(path).split("train")
        return X[:n], y[:n]
    rng = np.random.default_rng(0)
    X = (rng.random((n, 104)) < 0.12).astype(np.float32)
    return X, (X[:, :5].sum(axis=1) > 0.6).astype(np.int64)


def time_trials_at_once(X: np.ndarray, y: np.ndarray, trials: int, z: float) -> float:
    pool = np.concatenate([X, X[:1] * 0.0])  # a replacement record x̂′ for bounded neighbours
    ypool = np.concatenate([y, y[:1]])
    n = len(X)
    world = np.random.default_rng(1).integers(0, 2, trials)
    mask = np.ones((trials, n + 1), bool)
    mask[:, n] = False
    mask[world == 0, 0] = False
    mask[world == 0, n] = True
    model = models.model_for_dataset("adult", X.shape[1:], 2)
    cfg = dpsgd.DPSGDConfig(CLIP, z, LR, STEPS, noise_scale="local", normalizer=float(n))
    start = time.perf_counter()
    dpsgd.train_trials(
        model,
        pool,
        ypool,
        mask,
        cfg,
        seed=0,
        tracked=dpsgd.TrackedRecords((0, n), (1.0, -1.0)),
        observers={"di": di_observer()},
    )
    return time.perf_counter() - start


def time_tf_privacy_loop(X: np.ndarray, y: np.ndarray, trials: int, z: float) -> float:
    from tensorflow_privacy import DPKerasSGDOptimizer

    # Build and compile once; each trial restarts from fresh weights (plain SGD has no optimizer
    # state), so the loop pays no per-trial tracing: the best case for one-at-a-time training.
    model = tf.keras.Sequential(
        [
            tf.keras.Input(X.shape[1:]),
            tf.keras.layers.Dense(6, activation="relu"),
            tf.keras.layers.Dense(6, activation="relu"),
            tf.keras.layers.Dense(2),
        ]
    )
    opt = DPKerasSGDOptimizer(
        l2_norm_clip=CLIP, noise_multiplier=z, num_microbatches=len(X), learning_rate=LR
    )
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    model.compile(optimizer=opt, loss=loss)
    init = models.model_for_dataset("adult", X.shape[1:], 2).init(trials, seed=0)
    model.set_weights([p[0] for p in init])
    model.train_on_batch(X, y)  # trace once, outside the timing
    start = time.perf_counter()
    for t in range(trials):
        model.set_weights([p[t] for p in init])
        for _ in range(STEPS):
            model.train_on_batch(X, y)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prepared", type=Path, default=Path("data/prepared/adult.npz"))
    parser.add_argument("--trials", type=int, default=1000, help="trials for the trials-at-once trainer")
    parser.add_argument("--loop-trials", type=int, default=3, help="trials timed for the TF Privacy loop")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()

    X, y = adult_data(args.prepared)
    delta = 1.0 / len(X)
    z = calibrate_noise_multiplier(math.log(9.0), delta, 1.0, STEPS)
    fast = time_trials_at_once(X, y, args.trials, z)
    slow = time_tf_privacy_loop(X, y, args.loop_trials, z)
    result = {
        "examples": len(X),
        "steps": STEPS,
        "noise_multiplier": z,
        "cpu_threads": os.cpu_count(),
        "trials_at_once": args.trials,
        "trials_at_once_seconds": fast,
        "trials_at_once_per_s": args.trials / fast,
        "loop_trials": args.loop_trials,
        "loop_seconds": slow,
        "loop_per_s": args.loop_trials / slow,
        "loop_seconds_extrapolated": slow / args.loop_trials * args.trials,
    }
    result["speedup"] = result["trials_at_once_per_s"] / result["loop_per_s"]
    print(f"trials at once: {args.trials} trials in {fast:.1f} s = {args.trials / fast:.1f} trials/s")
    print(
        f"TF Privacy loop: {args.loop_trials} trials in {slow:.1f} s = {result['loop_per_s']:.3f} trials/s "
        f"(extrapolated {result['loop_seconds_extrapolated']:.0f} s for {args.trials})"
    )
    print(f"speed-up: {result['speedup']:.0f}x")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
