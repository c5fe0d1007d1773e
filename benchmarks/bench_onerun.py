"""One-run audit benchmark (Steinke, Nasr & Jagielski 2023): Adult MLP, white-box gradient canaries,
m = 1000, δ = 1e-5, every audit ONE training run of dpaudit's trainer.

Runs the pipeline's own stage functions (``dpaudit.pipeline.run_train`` … ``run_bounds``) of
``adult-onerun`` with the repository's ``params.yaml`` plus overrides, into a scratch root (adult is
prepared there from the vendored copy, or copied from ``data/prepared``), and prints:

(a) ε_LB (the headline: max of steinke and fdp_gaussian, jointly 95 %) per claimed ε ∈ {2, 4, 8};
(b) each analysis' ε_LB over its own ceiling on the ideal Gaussian canary game at the same m and ε:
    the median over seeds (the ceiling is itself a median over ideal runs; acceptance: within 10 %)
    and the mean ± its standard error (the ceiling from 1000 ideal runs, so that its own Monte Carlo
    error is small beside the seeds');
(c) over the seeds, how many ε_LB exceed the accountant's ε (PLD; must be none);
(d) the broken pipeline noise/10 at claimed ε = 2: fraction of seeds with ε_LB > 2 (target ≥ 95 %);
(e) the broken pipeline with the canaries' layer unclipped (raw canary norm 10·C): the same rate;
(f) black-box input canaries (mislabeled records scored by loss): ε_LB per ε (valid, may be small).

    python benchmarks/bench_onerun.py --root /tmp/bench-onerun            # 20 seeds
    python benchmarks/bench_onerun.py --root /tmp/bench-onerun --quick    # 3 seeds

Results are recorded in ``benchmarks/README.md`` ("One-run audit").
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from dpaudit import pipeline
from dpaudit.config import load_params
from dpaudit.layout import Audit

REPO = Path(__file__).resolve().parents[1]
AUDIT = "adult-onerun"
EPSILONS = (2.0, 4.0, 8.0)
ANALYSES = ("steinke", "fdp_gaussian")


def prepare_adult(root: Path, params: dict[str, Any]) -> None:
    """``root/data/prepared/adult.npz``: the pipeline's copy if there is one, else from the vendored files."""
    target = root / "data/prepared/adult.npz"
    if target.exists():
        return
    source = REPO / "data/prepared/adult.npz"
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.exists():
        shutil.copy2(source, target)
        return
    from dpaudit.data.download import download_dataset
    from dpaudit.data.prepare import DataConfig, prepare_dataset

    config = DataConfig.from_params(params)
    download_dataset("adult", root / "data/raw/adult", mirror=config.mirror, pool=config.pool_for("adult"))
    prepare_dataset("adult", root / "data/raw/adult", config, target)


def run(root: Path, base: dict[str, Any], **train: Any) -> dict[str, Any]:
    """One audit (one training run) with ``onerun.train`` overrides; its metrics."""
    params = copy.deepcopy(base)
    params["onerun"]["train"].update(train)
    for stage in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        stage(params, AUDIT, root=root)
    return json.loads(Audit("adult", "onerun", root).bounds_metrics_path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=Path("/tmp/bench-onerun"))
    parser.add_argument("--quick", action="store_true", help="3 seeds instead of 20")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per setting (default 20, --quick 3)")
    parser.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    parser.add_argument(
        "--ceiling-repeats",
        type=int,
        default=1000,
        help="Monte Carlo runs of each ceiling (the pipeline: 50)",
    )
    args = parser.parse_args()
    os.environ.setdefault("DPAUDIT_PROGRESS", "0")
    seeds = args.seeds or (3 if args.quick else 20)
    root = args.root
    root.mkdir(parents=True, exist_ok=True)
    base = load_params(REPO / "params.yaml")
    base["data"]["datasets"] = ["adult"]
    base["audits"] = {AUDIT: {"dataset": "adult", "experiment": "onerun"}}
    fixed = {"canaries": 1000, "canary_kind": "gradient", "break": "none", "delta": 1e-5}
    base["onerun"]["train"].update({**fixed, "noise_multiplier": None, "sampling_rate": 1.0})
    base["onerun"]["bounds"].update({"curve_canaries": [1000], "ceiling_repeats": args.ceiling_repeats})
    prepare_adult(root, base)
    started = time.perf_counter()
    out: dict[str, Any] = {"seeds": seeds, "canaries": 1000, "delta": 1e-5, "epsilons": {}}

    for eps in EPSILONS:
        runs = [run(root, base, epsilon=eps, seed=s) for s in range(seeds)]
        row: dict[str, Any] = {
            "epsilon_claimed": runs[0]["epsilon_claimed"],
            "epsilon_pld": runs[0]["epsilon_upper"]["pld"],
            "epsilon_rdp": runs[0]["epsilon_upper"]["rdp"],
            "noise_multiplier": runs[0]["noise_multiplier"],
            "epsilon_lower_seed0": runs[0]["epsilon_lower"],
            "epsilon_lower_mean": statistics.fmean(r["epsilon_lower"] for r in runs),
            "epsilon_lower_max": max(r["epsilon_lower"] for r in runs),
            "above_accountant": sum(r["epsilon_lower"] > r["epsilon_upper"]["pld"] for r in runs),
        }
        for a in ANALYSES:
            values = [r["analyses"][a]["epsilon_lower"] for r in runs]
            ceiling = runs[0]["analyses"][a]["ceiling"]
            row[a] = {
                "epsilon_lower_mean": statistics.fmean(values),
                "ceiling": ceiling,
                "ratio_median": statistics.median(values) / ceiling if ceiling > 0 else 0.0,
                "ratio_mean": statistics.fmean(values) / ceiling if ceiling > 0 else 0.0,
                "ratio_sd": statistics.stdev(v / ceiling for v in values)
                if ceiling > 0 and seeds > 1
                else 0.0,
            }
        out["epsilons"][f"{eps:g}"] = row
        print(f"ε={eps:g}: {json.dumps(row)}", flush=True)

    for name, train in (
        ("noise_div10", {"break": "noise_div10"}),
        ("unclipped_layer", {"break": "unclipped_layer"}),
    ):
        runs = [run(root, base, epsilon=2.0, seed=s, **train) for s in range(seeds)]
        out[name] = {
            "caught_rate": statistics.fmean(r["caught"] for r in runs),
            "epsilon_lower_mean": statistics.fmean(r["epsilon_lower"] for r in runs),
            "epsilon_lower_min": min(r["epsilon_lower"] for r in runs),
            "epsilon_claimed": runs[0]["epsilon_claimed"],
        }
        print(f"{name}: {json.dumps(out[name])}", flush=True)

    out["input"] = {}
    for eps in EPSILONS:
        metrics = run(root, base, epsilon=eps, seed=0, canary_kind="input")
        out["input"][f"{eps:g}"] = {
            "epsilon_lower": metrics["epsilon_lower"],
            "steinke": metrics["analyses"]["steinke"]["epsilon_lower"],
            "fdp_gaussian": metrics["analyses"]["fdp_gaussian"]["epsilon_lower"],
            "test_accuracy": metrics["test_accuracy"],
        }
        print(f"input ε={eps:g}: {json.dumps(out['input'][f'{eps:g}'])}", flush=True)
    out["seconds"] = round(time.perf_counter() - started, 1)

    print(
        f"\n| claimed ε | z | ε_LB (seed 0) | mean ε_LB over {seeds} seeds | steinke: median / mean ratio "
        "to ceiling | fdp_gaussian: median / mean ratio to ceiling | seeds with ε_LB > ε_PLD | "
        "input canaries ε_LB |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for key, row in out["epsilons"].items():
        ratios = [
            f"{row[a]['ratio_median']:.3f} / {row[a]['ratio_mean']:.3f} "
            f"± {row[a]['ratio_sd'] / seeds**0.5:.3f} (ceiling {row[a]['ceiling']:.2f})"
            for a in ANALYSES
        ]
        print(f"| {key} | {row['noise_multiplier']:.3g} | {row['epsilon_lower_seed0']:.3f} | "
              f"{row['epsilon_lower_mean']:.3f} | {ratios[0]} | {ratios[1]} | "
              f"{row['above_accountant']}/{seeds} | {out['input'][key]['epsilon_lower']:.3f} |")  # fmt: skip
    for name in ("noise_div10", "unclipped_layer"):
        r = out[name]
        print(f"broken {name} at claimed ε = 2: caught {r['caught_rate']:.0%} of {seeds} seeds "
              f"(ε_LB mean {r['epsilon_lower_mean']:.3f}, min {r['epsilon_lower_min']:.3f})")  # fmt: skip
    print(f"total {out['seconds']} s")
    if args.out is not None:
        args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
