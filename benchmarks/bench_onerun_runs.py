"""ε lower bound and power against the number of pooled runs r (``dpaudit.training_audit.runs.audit_runs``).

The user's training is the bug catalogue's digits MLP with TF Privacy's ``DPKerasSGDOptimizer``
(``benchmarks/bug_catalogue/common.py``); ``--noise-divisor`` divides the noise the optimizer uses
while the declaration keeps the σ that gives the claimed ε = 2 (1: a correct run). For each r the
runs are independent (own canaries, own inclusion bits) and pool into one verdict. Prints one JSON line
per r: the pooled ε lower bound, the detectable ε (80 % power on the ideal game at r·m canaries),
the verdict and its mismatches, and the wall time.

Run: ``python benchmarks/bench_onerun_runs.py --runs 1 2 4 --runner ray`` (results: benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def make_train(noise_divisor: float, epochs: int) -> Any:
    """The user's training as a function of a fresh auditor (what ``audit_runs`` calls once per run)."""

    def train(auditor: Any) -> None:
        if str(HERE) not in sys.path:  # a Ray worker starts without the benchmarks folder on its path
            sys.path.insert(0, str(HERE))
        from tensorflow_privacy import DPKerasSGDOptimizer

        from bug_catalogue import common

        x, y = common.digits()
        seed = auditor.seed % 100_000
        optimizer = DPKerasSGDOptimizer(
            l2_norm_clip=common.CLIP,
            noise_multiplier=common.declared_sigma() / noise_divisor,
            num_microbatches=None,
            learning_rate=common.LEARNING_RATE,
        )
        model = common.tfp_model(seed, optimizer)
        train_ds = auditor.wrap(common.shuffled_batches(x, y, seed))
        model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[auditor.callback()])

    return train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--runner", choices=["local", "ray"], default="local")
    parser.add_argument("--noise-divisor", type=float, default=4.0)
    parser.add_argument("--canaries", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from bug_catalogue import common
    from dpaudit.training_audit import DeclaredDPSGD
    from dpaudit.training_audit.runs import audit_runs

    x, _ = common.digits()
    declared = DeclaredDPSGD(
        noise_multiplier=common.declared_sigma(),
        clip_norm=common.CLIP,
        batch_size=common.BATCH,
        dataset_size=len(x),
        epochs=args.epochs,
        sampling="shuffle",
        epsilon=common.CLAIMED_EPSILON,
    )
    train = make_train(args.noise_divisor, args.epochs)
    for runs in args.runs:
        start = time.perf_counter()
        verdict = audit_runs(
            train, declared, runs=runs, canaries=args.canaries, seed=args.seed, runner=args.runner
        )
        record = {
            "runs": runs,
            "noise_divisor": args.noise_divisor,
            **verdict.as_dict(),
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
