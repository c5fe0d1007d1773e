"""Ray sharding overhead: one adult identifiability setting, single process vs Ray.

The workload is the DI audit's training: adult MLP 104-6-6-2, |D| = 1000, 30 full-batch steps,
bounded neighbours with local-sensitivity noise and the DI observer (as in
``experiments/identifiability/train.py`` and ``bench_side_by_side.py``), 10⁴ trials by default.

- **single**: ``train_trials`` in a fresh subprocess with 2 intra-op threads.
- **ray, S shards**: ``run_trials`` with ``runner.kind: ray`` on a local Ray started with 2 CPUs
  (before the clock starts; its start-up is timed separately); each task reserves 1 CPU and runs
  TensorFlow with 1 intra-op thread, so 2 workers use the 2 cores. Run once per shard count.

Both sides start cold (each process traces the compiled step once). The per-shard overhead h is
estimated from two shard counts S₁ < S₂ on W workers: h ≈ W·(t(S₂) − t(S₁)) / (S₂ − S₁).

    python benchmarks/bench_ray.py [--trials 10000] [--shards 2,8] [--out results.json]

``--stage AUDIT`` instead times the whole train stage as a user runs it, ``python stages/train.py
AUDIT`` from process start to exit (TensorFlow import, Ray start-up and shut-down included), with
the params of ``--workspace`` and ``runner.kind`` set to ``local`` and then ``ray`` (the other runner
keys at their defaults: one shard per CPU), alternating ``--repeats`` times, and checks that both
runners wrote identical arrays. The workspace must hold the stage's inputs (``data/check``,
``data/prepared``, ``data/sensitivity``: ``dvc repro sensitivity@<dataset>`` there); each run gets
a scratch copy whose ``data/train`` is its own. The load average is recorded before and after
every run, since on a shared machine other jobs move the wall times.

    python benchmarks/bench_ray.py --stage digits-identifiability [--workspace .] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("DPAUDIT_PROGRESS", "0")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ADULT_Z, ADULT_C, ADULT_LR = 8.14, 3.0, 0.005


def workload(trials: int) -> tuple:
    """Model, pool, labels, membership masks, config and keyword arguments of the DI training."""
    from dpaudit.attacks import di
    from dpaudit.data.parsers import parse_adult
    from dpaudit.training import dpsgd, models

    vendor = ROOT / "data" / "vendor" / "adult"
    d = parse_adult(vendor / "adult.data.gz", vendor / "adult.test.gz")
    X, y = d.X[:1000].astype(np.float32), d.y[:1000].astype(np.int64)
    n = len(X)
    pool = np.concatenate([X, X[:1] * 0.0])
    ypool = np.concatenate([y, y[:1]])
    world = np.arange(trials) % 2
    mask = np.ones((trials, n + 1), bool)
    mask[:, n] = False
    mask[world == 0, 0] = False
    mask[world == 0, n] = True
    model = models.model_for_dataset("adult", (X.shape[1],), 2)
    cfg = dpsgd.DPSGDConfig(ADULT_C, ADULT_Z, ADULT_LR, 30, noise_scale="local", normalizer=1000.0)
    kw = {"tracked": dpsgd.TrackedRecords((0, n), (1.0, -1.0)), "observers": {"di": di.di_observer()}}
    return model, pool, ypool, mask, cfg, kw


def single_child(trials: int) -> None:
    """Train in this process (2 intra-op threads) and print the wall time and a checksum."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    from dpaudit.training import dpsgd

    model, X, y, mask, cfg, kw = workload(trials)
    t0 = time.perf_counter()
    res = dpsgd.train_trials(model, X, y, mask, cfg, seed=0, **kw)
    seconds = time.perf_counter() - t0
    checksum = float(np.sum(res.records["di.dot"], dtype=np.float64))
    print(json.dumps({"seconds": seconds, "checksum": checksum}))


STAGE_INPUTS = ("data/check", "data/prepared", "data/sensitivity", "data/vendor", "stages", "models")


def stage_workspace(source: Path, scratch: Path, kind: str) -> Path:
    """A scratch workspace for one run: ``source``'s inputs linked, its params with ``runner.kind``."""
    import yaml

    scratch.mkdir(parents=True)
    for rel in STAGE_INPUTS:
        if (source / rel).exists():
            (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
            (scratch / rel).symlink_to((source / rel).resolve())
    params = yaml.safe_load((source / "params.yaml").read_text())
    params["runner"] = {"kind": kind}
    (scratch / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return scratch


def train_arrays(workspace: Path) -> dict[str, np.ndarray]:
    """Every array of every ``.npz`` the train stage wrote under ``data/train``."""
    arrays = {}
    for path in sorted((workspace / "data" / "train").rglob("*.npz")):
        with np.load(path) as npz:
            arrays.update({f"{path.relative_to(workspace)}:{k}": npz[k] for k in npz.files})
    return arrays


def time_stage(audit: str, source: Path, repeats: int) -> dict:
    """Wall time of ``stages/train.py AUDIT`` with the local and the Ray runner, alternating."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DPAUDIT_PROGRESS": "0"}
    env.pop("RAY_ADDRESS", None)
    runs: list[dict] = []
    outputs: dict[str, dict[str, np.ndarray]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_ray_stage_") as tmp:
        for rep in range(repeats):
            for kind in ("local", "ray"):
                ws = stage_workspace(source, Path(tmp) / f"{kind}-{rep}", kind)
                load_before = os.getloadavg()
                t0 = time.perf_counter()
                done = subprocess.run([sys.executable, "stages/train.py", audit], cwd=ws, env=env,
                                      capture_output=True, text=True)  # fmt: skip
                seconds = time.perf_counter() - t0
                if done.returncode != 0:
                    sys.exit(f"train@{audit} with runner {kind} failed (exit status {done.returncode}):"
                             f"\n{done.stderr[-3000:]}")  # fmt: skip
                load_after = os.getloadavg()
                runs.append({"runner": kind, "seconds": seconds, "load_average_before": load_before,
                             "load_average_after": load_after})  # fmt: skip
                print(f"train@{audit}, runner {kind}: {seconds:.1f} s "
                      f"(load average {load_before[0]:.1f} → {load_after[0]:.1f})", flush=True)  # fmt: skip
                outputs.setdefault(kind, train_arrays(ws))
    best = {k: min(r["seconds"] for r in runs if r["runner"] == k) for k in ("local", "ray")}
    local, ray = outputs["local"], outputs["ray"]
    identical = local.keys() == ray.keys() and all(np.array_equal(local[k], ray[k]) for k in local)
    return {
        "stage": f"train@{audit}",
        "cpus": os.cpu_count(),
        "runs": runs,
        "best_seconds": best,
        "ray_over_local": best["ray"] / best["local"],
        "identical_outputs": bool(local) and identical,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--shards", default="2,8", help="shard counts to time, comma-separated")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--stage", metavar="AUDIT", help="time train@AUDIT, local vs Ray runner")
    parser.add_argument("--workspace", type=Path, default=ROOT, help="where the stage's inputs are")
    parser.add_argument("--repeats", type=int, default=1, help="runs per runner with --stage")
    parser.add_argument("--single-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.single_child:
        single_child(args.trials)
        return
    if args.stage:
        summary = time_stage(args.stage, args.workspace.resolve(), args.repeats)
        print(json.dumps(summary, indent=2))
        if args.out:
            args.out.write_text(json.dumps(summary, indent=2))
        return

    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "2", "PYTHONPATH": str(ROOT / "src")}
    load0 = os.getloadavg()
    out = subprocess.run(
        [sys.executable, __file__, "--single-child", "--trials", str(args.trials)],
        env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    single = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"single process, 2 threads: {single['seconds']:.1f} s", flush=True)

    import ray

    from dpaudit.training import dpsgd, shards

    model, X, y, mask, cfg, kw = workload(args.trials)
    size, num_chunks = dpsgd.chunk_layout(model, mask, cfg)
    os.environ.setdefault("PYTHONPATH", str(ROOT / "src"))
    os.environ.setdefault("RAY_worker_niceness", "0")  # Ray's default 15 starves workers on a shared box
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    startup = time.perf_counter() - t0
    results: dict[str, float] = {}
    checksums: dict[str, float] = {}
    for s in [int(v) for v in args.shards.split(",")]:
        runner = shards.RunnerConfig(kind="ray", shard_chunks=-(-num_chunks // s))
        t0 = time.perf_counter()
        with shards.using(runner):
            res = shards.run_trials(model, X, y, mask, cfg, seed=0, **kw)
        results[str(s)] = time.perf_counter() - t0
        checksums[str(s)] = float(np.sum(res.records["di.dot"], dtype=np.float64))
        print(f"ray, 2 workers × 1 thread, {s} shards: {results[str(s)]:.1f} s "
              f"({results[str(s)] / single['seconds']:.2f}× single)", flush=True)  # fmt: skip
    ray.shutdown()
    counts = sorted(int(k) for k in results)
    overhead = None
    if len(counts) >= 2:
        s1, s2 = counts[0], counts[-1]
        overhead = 2 * (results[str(s2)] - results[str(s1)]) / (s2 - s1)
    summary = {
        "trials": args.trials,
        "chunk_size": size,
        "chunks": num_chunks,
        "single_seconds": single["seconds"],
        "ray_seconds_by_shards": results,
        "ray_over_single": {k: v / single["seconds"] for k, v in results.items()},
        "ray_startup_seconds": startup,
        "per_shard_overhead_seconds": overhead,
        "identical_checksums": all(v == single["checksum"] for v in checksums.values()),
        "load_average_before": load0,
        "load_average_after": os.getloadavg(),
    }
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
