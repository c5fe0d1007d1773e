"""Does the one-run audit catch realistic DP-SGD bugs in a user's Keras code, and leave correct code alone?

Runs every entry of ``benchmarks/bug_catalogue`` (3 controls and bugs of five classes: noise scale,
clipping, noise reused or skipped, data loader, sampling; each a user's training script on digits with
the documented ``TrainingAuditor`` lines, claiming ε = 2) for several seeds, and prints one JSON line per
entry and seed, then the detection table (caught / seeds per entry) in Markdown. A control caught is a
false alarm; a bug not caught is a miss (see ``rho`` and ``mismatches`` in its lines).

    python benchmarks/bench_bugs.py --quick             # every entry, 3 seeds (443 s on 2 busy cores)
    python benchmarks/bench_bugs.py                     # every entry, 10 seeds (1514 s on 2 busy cores)
    python benchmarks/bench_bugs.py --only noise_div10 control_tfp_sgd --seeds 2

``--jobs`` audits that many runs at once, in separate processes (one TF thread each).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from dpaudit.logs import progress

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bug_catalogue import ENTRIES, load

QUICK_SEEDS = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SEEDS} seeds per entry (~7 min)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per entry (default 10; --quick: 3)")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run from here (to extend a run)")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=ENTRIES, help="run only these entries")
    parser.add_argument("--epochs", type=int, default=10, help="epochs each run trains (and declares)")
    parser.add_argument("--canaries", type=int, default=500, help="canaries per audit (cost grows with it)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs audited at once")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds = QUICK_SEEDS
    if args.seeds < 1 or args.jobs < 1 or args.first_seed < 0:
        parser.error("--seeds and --jobs must be >= 1, --first-seed >= 0")
    return args


def _init_worker(threads: int) -> None:
    """A worker process: quiet TF, ``threads`` TF threads, no nested progress bars."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["DPAUDIT_PROGRESS"] = "0"
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)


def audit_one(name: str, seed: int, epochs: int, canaries: int) -> dict[str, Any]:
    """Run entry ``name`` once and return its JSON record (``rho``: the canaries' signal-to-noise ratio
    over the declared, ρ̂ = Σ b·a / Σ b², the statistic of the signal-to-noise checks)."""
    entry = load(name)
    start = time.perf_counter()
    verdict = entry.run(seed, epochs=epochs, canaries=canaries)
    seconds = time.perf_counter() - start
    rho = next((c.statistic for c in verdict.checks if c.name == "signal_to_noise_high"), math.nan)
    import tensorflow as tf

    tf.keras.backend.clear_session()  # each run builds new models and traced steps: free the last one's
    return {
        "name": name,
        "class": entry.BUG_CLASS,
        "seed": seed,
        "true_epsilon": entry.TRUE_EPSILON,
        "status": verdict.status,
        "caught": verdict.caught,
        "epsilon_lower": verdict.epsilon_lower,
        "claimed": verdict.claimed_epsilon,
        "mismatches": [c.name for c in verdict.mismatches],
        "rho": rho,
        "seconds": round(seconds, 1),
    }


def _json(record: dict[str, Any]) -> str:
    """One JSON line; non-finite floats as strings ("inf", "nan") so the line stays valid JSON."""
    clean = {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
    return json.dumps(clean, ensure_ascii=False)


def table(records: list[dict[str, Any]], names: list[str]) -> str:
    """The detection table: per entry, caught / seeds and the mismatch checks that fired."""
    rows = [
        "| entry | class | true ε | caught / seeds | median ρ̂ | checks that rejected (runs) |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        mine = [r for r in records if r["name"] == name]
        if not mine:
            continue
        caught = sum(r["caught"] for r in mine)
        fired: dict[str, int] = {}
        for r in mine:
            if r["status"].startswith("VIOLATION"):
                fired["ε lower bound"] = fired.get("ε lower bound", 0) + 1
            for m in r["mismatches"]:
                fired[m] = fired.get(m, 0) + 1
        rhos = sorted(r["rho"] for r in mine if math.isfinite(r["rho"]))
        rho = f"{rhos[len(rhos) // 2]:.3g}" if rhos else "–"
        eps = mine[0]["true_epsilon"]
        flag = " ⚠" if (mine[0]["class"] == "control") == (caught > 0) else ""
        checks = ", ".join(f"{k} ({v})" for k, v in sorted(fired.items())) or "–"
        rows.append(
            f"| {name} | {mine[0]['class']} | {eps:.4g} | {caught} / {len(mine)}{flag} | {rho} | {checks} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    names = list(args.only or ENTRIES)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(name, seed) for seed in seeds for name in names]
    records: list[dict[str, Any]] = []
    start = time.perf_counter()
    threads = 1 if args.jobs > 1 else 0
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(args.jobs, mp_context=context, initializer=_init_worker, initargs=(threads,))
    with pool:
        futures: dict[Future, tuple[str, int]] = {
            pool.submit(audit_one, name, seed, args.epochs, args.canaries): (name, seed)
            for name, seed in jobs
        }
        for future in progress(as_completed(futures), desc="audited runs", total=len(jobs), unit="run"):
            record = future.result()
            records.append(record)
            print(_json(record), flush=True)
    wall = time.perf_counter() - start
    print()
    print(table(records, names))
    controls = [r for r in records if r["class"] == "control"]
    bugs = [r for r in records if r["class"] != "control"]
    print(
        f"\n{len(records)} runs ({args.seeds} seed(s), {args.epochs} epochs, {args.canaries} canaries, "
        f"{args.jobs} job(s)) in {wall:.0f} s: controls flagged {sum(r['caught'] for r in controls)} / "
        f"{len(controls)}, bugs caught {sum(r['caught'] for r in bugs)} / {len(bugs)}"
    )


if __name__ == "__main__":
    main()
