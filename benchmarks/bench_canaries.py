"""Benchmark of the canaries audit (issue 14): stage times, models per second, acceptance numbers.

Runs train → losses → attack → bounds of ``digits-canaries`` with the repository's params (plus
``key=value`` overrides, YAML values) into a scratch root, and prints each stage's wall time, the
train stage's models per second and the acceptance checks of issue 14::

    python benchmarks/bench_canaries.py /tmp/canaries canaries.train.models=32

Results are recorded in ``benchmarks/README.md`` ("Sample-level evaluation (issue 14)").
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import yaml

from dpaudit import pipeline
from dpaudit.config import load_params
from dpaudit.data.prepare import DataConfig, prepare_dataset
from dpaudit.layout import Audit

AUDIT = "digits-canaries"


def main(argv: list[str]) -> None:
    root = Path(argv[0] if argv else "/tmp/bench-canaries")
    root.mkdir(parents=True, exist_ok=True)
    params = load_params("params.yaml")
    for override in argv[1:]:
        key, value = override.split("=", 1)
        node = params
        *path, last = key.split(".")
        for part in path:
            node = node[part]
        node[last] = yaml.safe_load(value)
    prepared = root / "data/prepared/digits.npz"
    if not prepared.exists():
        prepare_dataset("digits", root / "data/raw/digits", DataConfig.from_params(params), prepared)
    total = 0.0
    for run in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        started = time.perf_counter()
        run(params, AUDIT, root=root)
        seconds = time.perf_counter() - started
        total += seconds
        print(f"{run.__name__:12s} {seconds:7.1f} s", flush=True)
    print(f"{'total':12s} {total:7.1f} s")
    metrics = json.loads((root / f"metrics/{AUDIT}.json").read_text())
    manifest = json.loads(Audit("digits", "canaries", root).manifest_path.read_text())
    rate = manifest["facts"]["models_trained"] / max(manifest["seconds"], 1e-9)
    print(f"models per second (train stage): {rate:.2f}")
    print(json.dumps(metrics["checks"], indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
