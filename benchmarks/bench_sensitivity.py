"""Time the dataset-sensitivity search (Bernau et al. Eqs. 18, 20) on real prepared data.

Uses ``data/prepared/<ds>.npz`` when the prepare stage has written it; otherwise prepares the
dataset from the mirror (``DPAUDIT_DATA_MIRROR`` or ``../shared/datasets``) in a temporary folder
with the default ``data`` params. Datasets whose files are unavailable are skipped with a note.

    .venv/bin/python benchmarks/bench_sensitivity.py                  # adult and mnist
    .venv/bin/python benchmarks/bench_sensitivity.py mnist --ssim-backend tensorflow

Prints wall and CPU seconds per search; ``--out`` also writes them as JSON.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from dpaudit.config import load_params
from dpaudit.data.prepared import PreparedData
from dpaudit.io import write_json
from dpaudit.logs import setup_logging
from dpaudit.sensitivity.measures import make_measure
from dpaudit.sensitivity.search import SensitivityConfig, search_bounded, search_unbounded

REPO = Path(__file__).resolve().parents[1]
log = logging.getLogger("bench_sensitivity")


def load_prepared(name: str) -> PreparedData | None:
    """The prepared dataset, from the pipeline's output or freshly from the mirror; None if unavailable."""
    path = REPO / "data" / "prepared" / f"{name}.npz"
    if path.exists():
        return PreparedData.load(path)
    from dpaudit.data.download import DataError, download_dataset
    from dpaudit.data.prepare import DataConfig, build_prepared

    config = DataConfig.from_params(load_params(REPO / "params.yaml"))
    mirror = os.environ.get("DPAUDIT_DATA_MIRROR") or str((REPO / ".." / "shared" / "datasets").resolve())
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / name
        try:
            download_dataset(name, raw, mirror if Path(mirror).is_dir() else None, pool=config.pool_for(name),
                             retries=1)
        except DataError as exc:
            log.warning("%s: skipped, no data (%s)", name, exc)
            return None
        return build_prepared(name, raw, config)


def timed(fn, *args, **kwargs) -> tuple[object, float, float]:  # noqa: ANN001
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", default=["adult", "mnist"])
    parser.add_argument("--chunk-size", type=int, default=None, help="rows of D per block (default: params)")
    parser.add_argument("--ssim-backend", choices=["numpy", "tensorflow"], default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the timings as JSON")
    args = parser.parse_args(argv)
    setup_logging()
    params = load_params(REPO / "params.yaml")
    section = dict(params.get("sensitivity", {}))
    if args.chunk_size is not None:
        section["chunk_size"] = args.chunk_size
    if args.ssim_backend is not None:
        section["ssim_backend"] = args.ssim_backend
    config = SensitivityConfig.from_params({"sensitivity": section})
    results: dict[str, dict[str, float]] = {}
    for name in args.datasets:
        prepared = load_prepared(name)
        if prepared is None:
            continue
        measure_name = config.measure_for(name)
        measure = make_measure(measure_name, kind=prepared.kind, record_shape=prepared.input_shape,
                               ssim_filter_size=config.ssim_filter_size, ssim_backend=config.ssim_backend)
        X_D, X_U = prepared.X[prepared.train_idx], prepared.X[prepared.pool_idx]
        unb, t_unb, c_unb = timed(search_unbounded, X_D, measure, config.chunk_size, top_k=config.top_k,
                                  index=prepared.train_idx)
        bnd, t_bnd, c_bnd = timed(search_bounded, X_D, X_U, measure, config.chunk_size, top_k=config.top_k,
                                  index=prepared.train_idx, replacement_index=prepared.pool_idx)
        pairs = len(X_D) * len(X_U)
        results[name] = {
            "n_train": len(X_D), "n_pool": len(X_U), "features": int(X_D[0].size),
            "unbounded_wall_s": t_unb, "unbounded_cpu_s": c_unb,
            "bounded_wall_s": t_bnd, "bounded_cpu_s": c_bnd, "bounded_pairs_per_s": pairs / t_bnd,
        }
        print(f"{name:8s} {measure_name:9s} |D|={len(X_D)} |U\\D|={len(X_U)} d={X_D[0].size}: "
              f"unbounded {t_unb:.2f} s wall ({c_unb:.2f} s CPU), bounded {t_bnd:.2f} s wall "
              f"({c_bnd:.2f} s CPU, {pairs / t_bnd:,.0f} pairs/s); x̂={unb.index} "
              f"(x̂, x̂′)=({bnd.index}, {bnd.replacement_index}) d={bnd.distance:.4g}")
    if args.out is not None:
        write_json(args.out, {"config": section, "load_avg": os.getloadavg(), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
