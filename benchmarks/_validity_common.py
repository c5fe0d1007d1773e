"""What the validity scripts (``validity.py``, ``validity_stepwise.py``, ``validity_onerun.py``) share:
one check's result row (:func:`row`), the Markdown table of rows and the command line that prints it.

Each check counts overclaims (a bound above the true ε) among Monte Carlo repeats; it passes when the
rate is at most the stated 1 − level plus 2 Monte Carlo standard errors at that rate.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

LEVEL = 0.95


def row(
    estimator: str, mechanism: str, setting: str, overclaims: int, repeats: int, level: float = LEVEL
) -> dict:
    """One check's result: overclaim rate, its MC standard error at the stated rate, and the verdict."""
    alpha = 1.0 - level
    se = math.sqrt(alpha * (1.0 - alpha) / repeats)
    rate = overclaims / repeats
    return {"estimator": estimator, "mechanism": mechanism, "setting": setting, "stated_level": level,
            "repeats": repeats, "overclaims": overclaims, "rate": rate, "mc_se": se,
            "ok": rate <= alpha + 2.0 * se}  # fmt: skip


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table (the ones in benchmarks/README.md)."""
    lines = ["| estimator | mechanism | setting | level | repeats | overclaims | rate ± MC s.e. | ok |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in rows:
        level = "–" if math.isnan(r["stated_level"]) else f"{r['stated_level']:g}"
        verdict = "yes" if r["ok"] else "NO"
        lines.append(f"| {r['estimator']} | {r['mechanism']} | {r['setting']} | {level} | {r['repeats']} | "
                     f"{r['overclaims']} | {r['rate']:.3f} ± {r['mc_se']:.3f} | {verdict} |")  # fmt: skip
    return "\n".join(lines)


def main(
    run: Callable[..., list[dict]], description: str, quick_help: str, argv: list[str] | None = None
) -> int:
    """Parse ``--quick`` / ``--seed`` and print ``run``'s table; exit status 1 if any check failed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = run(quick=args.quick, seed=args.seed)
    print(table(rows))
    failed = [r for r in rows if not r["ok"]]
    print(f"\n{len(rows) - len(failed)} passed, {len(failed)} failed ({time.perf_counter() - start:.0f} s)")
    return 1 if failed else 0
