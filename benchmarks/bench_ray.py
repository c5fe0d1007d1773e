"""Ray sharding cost on one machine: a sharded run against the local run, short and long.

The workload is the DI audit's training: adult MLP 104-6-6-2, |D| = 1000, 30 full-batch steps,
bounded neighbours with local-sensitivity noise and the DI observer (as in
``experiments/identifiability/train.py`` and ``bench_side_by_side.py``).

Default mode: for a short training (``--short`` trials) and a longer one (``--long`` trials), run
fresh processes alternately (local, ray, local, ray, …; ``--repeats`` pairs) and time each from
process start to exit (Python and TensorFlow import, Ray start-up and shut-down included):

- **local**: ``run_trials`` with ``runner.kind: local`` (one ``train_trials`` call);
- **ray**: ``run_trials`` with ``runner.kind: ray`` at its defaults: the driver trains shards at
  once while a local Ray starts in the background with one CPU fewer than the machine, and the
  workers, once up, pull the remaining shards from the same queue.

It reports the median wall time of each runner, the ratio ray / local per workload, who trained
the shards in each Ray run, and whether every run's DI records matched the local checksum. The
load average is recorded before and after every run (other jobs move wall times on a shared box).

    python benchmarks/bench_ray.py [--short 1000] [--long 20000] [--repeats 3] [--out results.json]

``--stage AUDIT`` instead times the whole train stage as a user runs it, ``python stages/train.py
AUDIT`` from process start to exit, with the params of ``--workspace`` and ``runner.kind`` set to
``local`` and then ``ray`` (the other runner keys at their defaults), alternating ``--repeats``
times, reports medians, and checks that both runners wrote identical arrays. The workspace must hold
the stage's inputs (``data/check``, ``data/prepared``, ``data/sensitivity``: ``dvc repro
sensitivity@<dataset>`` there); each run gets a scratch copy whose ``data/train`` is its own.

    python benchmarks/bench_ray.py --stage digits-identifiability [--workspace .] [--repeats 3]
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
    from dpaudit.data.parsers import parse_adult
    from dpaudit.training import dpsgd, models
    from dpaudit.training.dpsgd.difference import di_observer

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
    kw = {"tracked": dpsgd.TrackedRecords((0, n), (1.0, -1.0)), "observers": {"di": di_observer()}}
    return model, pool, ypool, mask, cfg, kw


def child(kind: str, trials: int) -> None:
    """Train once with runner ``kind`` in this process; print the training's seconds, a checksum of
    the DI records and who trained the shards (Ray is shut down at exit, inside the parent's clock)."""
    from dpaudit.training import shards

    model, X, y, mask, cfg, kw = workload(trials)
    t0 = time.perf_counter()
    with shards.using(shards.RunnerConfig(kind=kind)):
        res = shards.run_trials(model, X, y, mask, cfg, seed=0, **kw)
    seconds = time.perf_counter() - t0
    checksum = float(np.sum(res.records["di.dot"], dtype=np.float64))
    owners = list(shards.last_shard_owners) if kind == "ray" else []
    print(json.dumps({"train_seconds": seconds, "checksum": checksum, "owners": owners}))


def compare(trials: int, repeats: int) -> dict:
    """Fresh processes, local and ray alternately, ``repeats`` pairs: medians and their ratio."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DPAUDIT_PROGRESS": "0"}
    env.pop("RAY_ADDRESS", None)
    runs: list[dict] = []
    for _ in range(repeats):
        for kind in ("local", "ray"):
            load_before = os.getloadavg()
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, __file__, "--child", kind, "--trials", str(trials)],
                                 env=env, capture_output=True, text=True)  # fmt: skip
            seconds = time.perf_counter() - t0
            if out.returncode != 0:
                sys.exit(f"{kind} run failed (exit status {out.returncode}):\n{out.stderr[-3000:]}")
            result = json.loads(out.stdout.strip().splitlines()[-1])
            runs.append({"runner": kind, "seconds": seconds, **result, "load_average_before": load_before,
                         "load_average_after": os.getloadavg()})  # fmt: skip
            owners = result["owners"]
            who = f", shards: {owners.count('driver')} driver / {owners.count('ray')} ray" if owners else ""
            print(f"{trials} trials, {kind}: {seconds:.1f} s (training {result['train_seconds']:.1f} s{who}; "
                  f"load {load_before[0]:.1f} → {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
    median = {k: float(np.median([r["seconds"] for r in runs if r["runner"] == k])) for k in ("local", "ray")}
    checksums = {r["checksum"] for r in runs}
    return {
        "trials": trials,
        "runs": runs,
        "median_seconds": median,
        "ray_over_local": median["ray"] / median["local"],
        "identical_checksums": len(checksums) == 1,
    }


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
    best = {k: float(np.median([r["seconds"] for r in runs if r["runner"] == k])) for k in ("local", "ray")}
    local, ray = outputs["local"], outputs["ray"]
    identical = local.keys() == ray.keys() and all(np.array_equal(local[k], ray[k]) for k in local)
    return {
        "stage": f"train@{audit}",
        "cpus": os.cpu_count(),
        "runs": runs,
        "median_seconds": best,
        "ray_over_local": best["ray"] / best["local"],
        "identical_outputs": bool(local) and identical,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=int, default=1000, help="trials of the short training")
    parser.add_argument("--long", type=int, default=20000, help="trials of the longer training")
    parser.add_argument("--repeats", type=int, default=3, help="runs per runner and workload")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--stage", metavar="AUDIT", help="time train@AUDIT, local vs Ray runner")
    parser.add_argument("--workspace", type=Path, default=ROOT, help="where the stage's inputs are")
    parser.add_argument("--child", choices=("local", "ray"), help=argparse.SUPPRESS)
    parser.add_argument("--trials", type=int, default=1000, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.trials)
        return
    if args.stage:
        summary = time_stage(args.stage, args.workspace.resolve(), args.repeats)
    else:
        summary = {
            "cpus": os.cpu_count(),
            "command": " ".join(["python", "benchmarks/bench_ray.py", *sys.argv[1:]]),
            "workloads": [compare(t, args.repeats) for t in (args.short, args.long)],
        }
        for w in summary["workloads"]:
            print(f"{w['trials']} trials: local {w['median_seconds']['local']:.1f} s, ray "
                  f"{w['median_seconds']['ray']:.1f} s (medians of {args.repeats}): ray / local = "
                  f"{w['ray_over_local']:.2f}", flush=True)  # fmt: skip
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
