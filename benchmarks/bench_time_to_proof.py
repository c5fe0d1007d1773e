"""Time to proof: wall time on this machine until an audit certifies ε_LB ≥ 0.8·ε_PLD.

An audit "proves" its claim when its headline lower bound, at the joint level it states (95 % by
default), reaches a fixed share (0.8) of the mechanism's ε_PLD. This script runs the library's real
pipeline (:func:`dpaudit.pipeline.run_train`, ``run_losses``, ``run_attack``, ``run_bounds`` on params
dicts, into a scratch directory) with more and more trials per world until that happens, and reports
the trials needed and the seconds spent in the trainer and in the statistics (losses, attack, bounds).
Each rung of the ladder runs ``--seeds`` independent audits (training seeds 0, 1, …); the first rung
whose median ratio reaches the target is the answer, with the mean seconds of one audit there (the
cumulative time of the whole ladder is reported as well).

Workloads (the headline bound of each audit, as its report states it):

1. ``adult-F``: instantiation audit, threat model F (Nasr et al. 2021 §IV-F, malicious dataset), target
   ε = 2 at δ = 1e-5, q = 0.1, T = 100; headline ``epsilon_lower_family`` (subsampled-Gaussian family
   bound from every step's canary projection, 95 % joint);
2. ``digits-identifiability``: identifiability audit (Bernau et al. 2021) at ρβ = 0.99 (ε = ln 99),
   local sensitivity, bounded neighbours, 30 full-batch steps; headline GDP bound (95 % joint);
3. ``mnist-F``: the same instantiation audit, threat model F, on the mnist CNN (the mirror's test split
   as population, ``DPAUDIT_DATA_MIRROR`` or ``/work/shared/datasets``). Crafter 4 puts the canary on
   the coordinates the malicious dataset updates least, first-layer convolution weights on this CNN;
   the trainer releases the privatized sums at those coordinates only (``train_trials(released=...)``
   on convolution entries): with learning rate 0 and one θ shared by every trial, the rows' gradients
   there are computed once per chunk of up to 1024 trials, and a step evaluates no model.

    python benchmarks/bench_time_to_proof.py [--quick] [--out results.json]

Ladders double from 25 trials per world; ``--quick`` stops them at 800 (adult F), 400 (identifiability)
and 400 (mnist F) trials per world. ``--start`` skips the rungs below a number of trials per world
(e.g. to time mnist F where adult F reached the target).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("DPAUDIT_PROGRESS", "0")

import yaml

from dpaudit import pipeline
from dpaudit.data.prepare import DataConfig, prepare_dataset
from dpaudit.data.prepared import PreparedData
from dpaudit.sensitivity.search import SensitivityConfig, run_sensitivity

ROOT = Path(__file__).resolve().parents[1]
TARGET_SHARE = 0.8
MIRROR = Path(os.environ.get("DPAUDIT_DATA_MIRROR", "/work/shared/datasets"))


@dataclass(frozen=True)
class Workload:
    """One audit: which dataset and experiment, how to set its trials per world, where its headline
    bound and ε_PLD sit in the results JSON, and the ladder of trials per world to try."""

    name: str
    dataset: str
    experiment: str
    configure: Callable[[dict[str, Any], int], None]
    headline: Callable[[dict[str, Any]], tuple[float, float]]
    ladder: tuple[int, ...]
    needs_sensitivity: bool = False


def _instantiation_f(p: dict[str, Any], trials: int) -> None:
    p["instantiation"]["train"].update(
        threat_models=["F"], target_epsilons=[2], malicious_trials_per_world=trials
    )
    # The idealised F Monte Carlo is reported beside the audit, not part of the proof: keep it small.
    p["instantiation"]["attack"]["simulation_trials_per_world"] = 1000


def _f_headline(metrics: dict[str, Any]) -> tuple[float, float]:
    """(headline ε lower bound, ε_PLD) at ε = 2: the results table's headline where the results carry
    one (``headline``, with ε_PLD in the ``setting=eps2`` group), else F's cell (``F.eps2``)."""
    if "headline" in metrics:
        pld = metrics.get("setting=eps2", {}).get("epsilon_upper_pld")
        if pld is None:
            raise KeyError("results have a headline but no epsilon_upper_pld in group setting=eps2")
        return float(metrics["headline"]["eps2"]["epsilon_lower"]), float(pld)
    cell = metrics["F"]["eps2"]
    return float(cell["epsilon_lower_family"]), float(cell["epsilon_pld"])


def _identifiability(p: dict[str, Any], trials: int) -> None:
    p["identifiability"]["train"].update(
        rho_beta=[0.99], sensitivities=["local"], neighbours=["bounded"], trials=trials,
        reference_rho_beta=0.99,
    )  # fmt: skip


def _gdp_headline(metrics: dict[str, Any]) -> tuple[float, float]:
    """(GDP ε lower bound of the DI adversary, ε_PLD) of the one identifiability setting: the
    results' ``setting=<s>/attack=di`` group and the accountants of ``setting=<s>``."""
    di_groups = [g for g in metrics if g.endswith("/attack=di") and "epsilon_lower_gdp" in metrics[g]]
    if len(di_groups) != 1:
        raise ValueError(f"expected one identifiability setting in the results, found {len(di_groups)}")
    setting = di_groups[0].rsplit("/", 1)[0]
    return float(metrics[di_groups[0]]["epsilon_lower_gdp"]), float(metrics[setting]["epsilon_upper_pld"])


def workloads(quick: bool) -> dict[str, Workload]:
    f_ladder = (25, 50, 100, 200, 400, 800, 1600, 3200, 6400)
    di_ladder = (25, 50, 100, 200, 400, 800, 1600)
    mnist_ladder = f_ladder
    if quick:
        f_ladder, di_ladder, mnist_ladder = f_ladder[:6], di_ladder[:5], f_ladder[:5]
    return {
        "adult-F": Workload("adult-F", "adult", "instantiation", _instantiation_f, _f_headline, f_ladder),
        "digits-identifiability": Workload(
            "digits-identifiability",
            "digits",
            "identifiability",
            _identifiability,
            _gdp_headline,
            di_ladder,
            needs_sensitivity=True,
        ),  # fmt: skip
        "mnist-F": Workload("mnist-F", "mnist", "instantiation", _instantiation_f, _f_headline, mnist_ladder),
    }


def audit_params(base: dict[str, Any], w: Workload, trials: int, seed: int = 0) -> dict[str, Any]:
    """params.yaml restricted to one audit of ``w`` with ``trials`` per world and training ``seed``."""
    p = copy.deepcopy(base)
    p[w.experiment]["train"]["seed"] = seed
    p["data"]["datasets"] = [w.dataset]
    p["data"]["mirror"] = str(MIRROR)
    p["audits"] = {f"{w.dataset}-{w.experiment}": {"dataset": w.dataset, "experiment": w.experiment}}
    w.configure(p, trials)
    return p


def prepare(root: Path, p: dict[str, Any], w: Workload) -> None:
    """Prepared data (and the dataset-sensitivity search, if the audit reads it) under ``root``."""
    audit = pipeline.audit_from_params(p, f"{w.dataset}-{w.experiment}", root)
    if audit.prepared_path.exists():
        return
    audit.prepared_path.parent.mkdir(parents=True, exist_ok=True)
    raw = MIRROR / w.dataset if (MIRROR / w.dataset).is_dir() else root / "raw" / w.dataset
    prepare_dataset(w.dataset, raw, DataConfig.from_params(p), audit.prepared_path)
    if w.needs_sensitivity:
        audit.sensitivity_path.parent.mkdir(parents=True, exist_ok=True)
        run_sensitivity(
            PreparedData.load(audit.prepared_path), SensitivityConfig.from_params(p), audit.sensitivity_path
        )


def run_audit(root: Path, base: dict[str, Any], w: Workload, trials: int, seed: int = 0) -> dict[str, Any]:
    """One audit with ``trials`` per world: headline bound, ε_PLD, trainer and statistics seconds."""
    p = audit_params(base, w, trials, seed)
    prepare(root, p, w)
    name = f"{w.dataset}-{w.experiment}"
    t0 = time.perf_counter()
    pipeline.run_train(p, name, root)
    t1 = time.perf_counter()
    for stage in (pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        stage(p, name, root)
    t2 = time.perf_counter()
    audit = pipeline.audit_from_params(p, name, root)
    lower, pld = w.headline(json.loads(audit.results_path.read_text()))
    return {
        "trials_per_world": trials,
        "seed": seed,
        "epsilon_lower": lower,
        "epsilon_pld": pld,
        "ratio": lower / pld if pld > 0 else 0.0,
        "trainer_s": t1 - t0,
        "statistics_s": t2 - t1,
        "load_average": os.getloadavg()[0],
        "peak_rss_mb": peak_rss_mb(),
    }


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB (run one workload per process, ``--only``,
    for each one's own peak)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def climb(root: Path, base: dict[str, Any], w: Workload, seeds: int) -> dict[str, Any]:
    """Run the ladder until the headline bound reaches ``TARGET_SHARE``·ε_PLD in the median of
    ``seeds`` independent audits per rung (one audit's bound is a random variable: a single seed
    crosses the target early or late by luck), or the ladder ends."""
    rungs: list[dict[str, Any]] = []
    for trials in w.ladder:
        audits = [run_audit(root, base, w, trials, seed) for seed in range(seeds)]
        for a in audits:
            print(f"{w.name}: {json.dumps({k: round(v, 4) for k, v in a.items()})}", flush=True)
        rungs.append(
            {
                "trials_per_world": trials,
                "ratios": [a["ratio"] for a in audits],
                "median_ratio": statistics.median(a["ratio"] for a in audits),
                "epsilon_pld": audits[0]["epsilon_pld"],
                "trainer_s": statistics.mean(a["trainer_s"] for a in audits),
                "statistics_s": statistics.mean(a["statistics_s"] for a in audits),
                "audits": audits,
            }
        )
        if rungs[-1]["median_ratio"] >= TARGET_SHARE:
            break
    reached = bool(rungs) and rungs[-1]["median_ratio"] >= TARGET_SHARE
    return {
        "reached": reached,
        "trials_per_world": rungs[-1]["trials_per_world"] if reached else None,
        "seconds": rungs[-1]["trainer_s"] + rungs[-1]["statistics_s"] if reached else None,
        "ladder_seconds": sum(a["trainer_s"] + a["statistics_s"] for r in rungs for a in r["audits"]),
        "rungs": rungs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="shorter ladders (see above)")
    parser.add_argument("--seeds", type=int, default=3, help="independent audits per rung (median)")
    parser.add_argument("--only", nargs="*", default=None, help="workload names to run (default: all)")
    parser.add_argument("--start", type=int, default=0, help="skip rungs below this many trials per world")
    parser.add_argument(
        "--keep", type=Path, default=None, help="scratch directory to keep (default: temporary)"
    )
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    loads = workloads(args.quick)
    names = args.only or list(loads)
    unknown = sorted(set(names) - set(loads))
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; known: {list(loads)}")
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="dpaudit-ttp-"))
    print(f"cpu threads {os.cpu_count()}; load average {os.getloadavg()}; scratch {scratch}", flush=True)
    results: dict[str, Any] = {"target_share": TARGET_SHARE, "load_average_start": os.getloadavg()}
    try:
        for name in names:
            w = loads[name]
            w = replace(w, ladder=tuple(t for t in w.ladder if t >= args.start))
            results[name] = climb(scratch / name, base, w, args.seeds)
            results[name]["peak_rss_mb_so_far"] = peak_rss_mb()
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    results["load_average_end"] = os.getloadavg()
    print(json.dumps(results, indent=1))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
