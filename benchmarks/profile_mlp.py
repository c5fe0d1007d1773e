"""Op breakdown of dpaudit's compiled MLP step next to the batched no-DP floor.

The two MLP workloads of ``bench_side_by_side.py`` (adult full batch with the DI observer, adult
Poisson q = 0.1) run one chunk's compiled multi-step function in a TF1 session with full tracing
(``RunMetadata`` step stats, which include the ops inside the while loop's body). Each op's time is
summed by op type over the run and divided by the number of steps; the floor (same model functions,
no clipping, no noise, the same trial count) is traced the same way. Tracing adds a per-op cost, so
read shares and the ops' ranking, not absolute totals; wall times without tracing are printed too.

    python benchmarks/profile_mlp.py [--trials 125] [--poisson-trials 50] [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("DPAUDIT_PROGRESS", "0")

import numpy as np
import tensorflow as tf

from bench_side_by_side import ADULT_C, ADULT_LR, ADULT_Z, adult, no_dp_loop
from dpaudit.training import dpsgd, models
from dpaudit.training.dpsgd import cache
from dpaudit.training.dpsgd.difference import di_observer


def _capture_call(run: Callable[[], Any]) -> tuple[Any, tuple]:
    """Run ``run`` (a ``train_trials`` call) and return the compiled step and its first call's args."""
    seen: list = []
    original = cache._StepFunction.get

    def get(self: Any) -> Callable:
        fn = original(self)

        def wrapped(*args: Any) -> Any:
            if not seen:
                seen.append((fn, args))
            return fn(*args)

        return wrapped

    cache._StepFunction.get = get  # type: ignore[method-assign]
    try:
        run()
    finally:
        cache._StepFunction.get = original  # type: ignore[method-assign]
    return seen[0]


def traced_breakdown(fn: Any, args: tuple, steps: int, repeats: int = 3) -> tuple[dict[str, float], float]:
    """Run the concrete graph of ``fn(*args)`` in a TF1 session with full tracing; return ms per
    step by op type (median over ``repeats`` traced runs) and the untraced wall ms per step."""
    concrete = fn.get_concrete_function(*args)
    graph = concrete.graph
    sources = _source_map(graph) if NODES else {}
    flat = [a for a in tf.nest.flatten(args, expand_composites=True) if isinstance(a, tf.Tensor)]
    feeds = {t.name: a.numpy() for t, a in zip(graph.inputs[: len(flat)], flat, strict=True)}
    for external, internal in graph.captures:
        feeds[internal.name] = external.numpy()
    outputs = [t.name for t in tf.nest.flatten(graph.structured_outputs, expand_composites=True)]
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(outputs, feeds)
        start = time.perf_counter()
        for _ in range(repeats):
            sess.run(outputs, feeds)
        wall = (time.perf_counter() - start) / repeats / steps * 1e3
        runs = []
        for _ in range(repeats):
            meta = tf.compat.v1.RunMetadata()
            opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
            sess.run(outputs, feeds, options=opts, run_metadata=meta)
            per: dict[str, float] = collections.defaultdict(float)
            for dev in meta.step_stats.dev_stats:
                for node in dev.node_stats:
                    op = node.timeline_label.split("(")[0].split("=")[-1].strip() or node.node_name
                    op = op.split(" ")[0] if op else node.node_name
                    per[op] += node.op_end_rel_micros / 1e3
                    if NODES:
                        parts = node.node_name.split("/")
                        names = ["/".join(parts[i:]) for i in range(len(parts))]
                        name = next((n for n in names if n in sources), node.node_name)
                        where = sources.get(name, "?" if "while" in node.node_name else "(outside the loop)")
                        per["src:" + where] += node.op_end_rel_micros / 1e3
                        per["node:" + op + ":" + name + " " + where] += node.op_end_rel_micros / 1e3
            runs.append(per)
    keys = set().union(*runs)
    out = {k: float(np.median([r.get(k, 0.0) for r in runs])) / steps for k in keys}
    if NODES:
        for prefix in ("src:", "node:"):
            nodes = sorted(((v, k) for k, v in out.items() if k.startswith(prefix)), reverse=True)
            for v, k in nodes[:NODES]:
                print(f"  {v:.3f} ms/step  {k[len(prefix):]}")
    return {k: v for k, v in out.items() if not k.startswith(("node:", "src:"))}, wall


NODES = 0  # print this many costliest nodes by name (--nodes)


def _source_map(graph: Any) -> dict[str, str]:
    """Op name (inside the while loop's body) → the innermost dpaudit frame that created it
    (``function:line``), so traced times can be attributed to the step's phases."""
    out: dict[str, str] = {}
    for op in graph.get_operations():
        if "While" not in op.type:
            continue
        body = graph._functions.get(op.get_attr("body").name)
        for inner in body.graph.get_operations():
            frames = [f for f in inner.traceback if "/dpaudit/" in f.filename]
            if frames:
                f = frames[-1]
                out[inner.name] = f"{os.path.basename(f.filename)}:{f.name}:{f.lineno}"
    return out


def table(title: str, columns: dict[str, tuple[dict[str, float], float, int]], top: int) -> None:
    """Print a markdown table: op type → ms per step and share, one pair of columns per run."""
    names = list(columns)
    totals = {n: sum(columns[n][0].values()) for n in names}
    ops = sorted(
        set().union(*(c[0] for c in columns.values())), key=lambda k: -columns[names[0]][0].get(k, 0)
    )
    print(f"\n### {title}\n")
    head = " | ".join(f"{n} ms/step | {n} share" for n in names)
    print(f"| op type | {head} |")
    print("| --- |" + " --- | --- |" * len(names))
    for k in ops[:top]:
        cells = " | ".join(
            f"{columns[n][0].get(k, 0.0):.3f} | {100 * columns[n][0].get(k, 0.0) / totals[n]:.1f} %"
            for n in names
        )
        print(f"| {k} | {cells} |")
    rest = " | ".join(
        f"{sum(v for k, v in columns[n][0].items() if k not in ops[:top]):.3f} | " for n in names
    )
    print(f"| (other) | {rest} |")
    print("| **traced op total** | " + " | ".join(f"{totals[n]:.3f} | " for n in names) + " |")
    print("| wall, untraced, ms/step | " + " | ".join(f"{columns[n][1]:.3f} | " for n in names) + " |")
    print("| trials | " + " | ".join(f"{columns[n][2]} | " for n in names) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=125, help="adult full-batch trials (one chunk)")
    parser.add_argument("--poisson-trials", type=int, default=50, help="adult Poisson trials (one chunk)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--only", choices=["full", "poisson"], default=None)
    parser.add_argument("--nodes", type=int, default=0, help="also list the costliest nodes by name")
    args = parser.parse_args()
    global NODES
    NODES = args.nodes
    print(f"load average {os.getloadavg()}")
    X, y = adult()
    model = models.model_for_dataset("adult", (X.shape[1],), 2)
    if args.only in (None, "full"):
        T, n = args.trials, 1000
        cfg = dpsgd.DPSGDConfig(ADULT_C, ADULT_Z, ADULT_LR, 30, noise_scale="local", normalizer=1000.0)
        pool = np.concatenate([X[:n], X[:1] * 0.0])
        ypool = np.concatenate([y[:n], y[:1]])
        world = np.arange(T) % 2
        mask = np.ones((T, n + 1), bool)
        mask[:, n] = False
        mask[world == 0, 0] = False
        mask[world == 0, n] = True
        fn, call = _capture_call(
            lambda: dpsgd.train_trials(
                model,
                pool,
                ypool,
                mask,
                cfg,
                seed=0,
                chunk_size=T,
                steps_per_call=30,
                tracked=dpsgd.TrackedRecords((0, n), (1.0, -1.0)),
                observers={"di": di_observer()},
            )  # fmt: skip
        )
        dp = traced_breakdown(fn, call, 30)
        init = [tf.constant(p) for p in model.init(T, seed=0)]
        fl = traced_breakdown(no_dp_loop(model, X[:n], y[:n], ADULT_LR), (init, tf.constant(30)), 30)
        table(
            f"adult full batch, {T} trials, 30 steps",
            {"dpaudit": (*dp, T), "floor": (*fl, T)},
            args.top,
        )
    if args.only in (None, "poisson"):
        T = args.poisson_trials
        cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 100, sampling_rate=0.1)
        mask = np.ones((T, 2000), bool)
        fn, call = _capture_call(
            lambda: dpsgd.train_trials(
                model, X[:2000], y[:2000], mask, cfg, seed=0, chunk_size=T, steps_per_call=100
            )
        )
        dp = traced_breakdown(fn, call, 100)
        table(f"adult Poisson q = 0.1 of 2000, {T} trials, 100 steps", {"dpaudit": (*dp, T)}, args.top)


if __name__ == "__main__":
    main()
