"""Do two runs of the default pipeline agree where they should? (another CPU, or another kernel library)

TensorFlow runs oneDNN kernels on AVX-512 CPUs and Eigen's elsewhere; the two sum in other orders, so
the models differ in their last bits, and chaotic training (many epochs without noise) amplifies that.
Run the pipeline twice (``TF_ENABLE_ONEDNN_OPTS=0`` and ``=1`` on one machine, or two machines) and
compare the checkouts:

    git clone . ../rerun && (cd ../rerun && TF_ENABLE_ONEDNN_OPTS=0 dvc repro -f)
    python benchmarks/kernel_reruns.py ../rerun            # this checkout against ../rerun

It prints (1) every headline of ``metrics/summary.json`` that differs (what ``dvc metrics diff``
would show; none is the goal), (2) per audit, how many rows of ``results/<audit>.csv`` changed at
all, and how many rows with an interval have a value outside the other run's interval, and (3) the
versioned files that differ. Exit status 1 if a headline differs.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import sys
from pathlib import Path

import pandas as pd

KEYS = ["group", "quantity", "estimator", "kind", "assumes"]


def flatten(tree: dict, prefix: str = "") -> dict[str, object]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (the keys ``dvc metrics diff`` prints)."""
    out: dict[str, object] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def headline_differences(a: Path, b: Path) -> list[str]:
    """The summary keys whose values differ between the two checkouts (or exist in one only)."""
    left = flatten(json.loads((a / "metrics/summary.json").read_text()))
    right = flatten(json.loads((b / "metrics/summary.json").read_text()))
    return [f"{k}: {left.get(k)} vs {right.get(k)}" for k in sorted(left.keys() | right.keys())
            if left.get(k) != right.get(k)]  # fmt: skip


def table_agreement(a: Path, b: Path) -> list[dict]:
    """Per audit: rows, rows changed, rows with an interval, and values outside the other's interval."""
    out = []
    for path in sorted((a / "results").glob("*.csv")):
        other = b / "results" / path.name
        if path.name == "fidelity.csv" or not other.exists():
            continue
        left, right = pd.read_csv(path), pd.read_csv(other)
        for frame in (left, right):
            frame["n"] = frame.groupby(KEYS, dropna=False).cumcount()
        both = left.merge(right, on=[*KEYS, "n"], suffixes=("_a", "_b"))
        changed = both[(both.value_a != both.value_b) & ~(both.value_a.isna() & both.value_b.isna())]
        ranged = both.dropna(subset=["low_a", "high_a", "low_b", "high_b"])
        moved = ranged[ranged.value_a != ranged.value_b]
        outside = moved[
            (moved.value_a < moved.low_b) | (moved.value_a > moved.high_b)
            | (moved.value_b < moved.low_a) | (moved.value_b > moved.high_a)
        ]  # fmt: skip
        examples = outside[["group", "quantity", "value_a", "value_b"]].head(3).to_dict("records")
        out.append({"audit": path.stem, "rows": len(both), "changed": len(changed),
                    "with interval": len(ranged), "outside": len(outside), "examples": examples})  # fmt: skip
    return out


def differing_files(a: Path, b: Path) -> list[str]:
    """The versioned result files (summary, results, plots) whose bytes differ."""
    names = ["metrics/summary.json"]
    for folder in ("results", "plots"):
        names += [str(p.relative_to(a)) for p in sorted((a / folder).rglob("*")) if p.is_file()]
    return [n for n in names if not (b / n).exists() or not filecmp.cmp(a / n, b / n, shallow=False)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the other checkout, after its own `dvc repro`")
    parser.add_argument("--this", type=Path, default=Path("."), help="this checkout (default: .)")
    args = parser.parse_args(argv)
    headlines = headline_differences(args.this, args.other)
    print(f"headlines that differ (dvc metrics diff): {len(headlines)}")
    for line in headlines:
        print(f"  {line}")
    rows = table_agreement(args.this, args.other)
    print("\n| audit | rows | changed | with interval | outside the other's interval |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['audit']} | {r['rows']} | {r['changed']} | {r['with interval']} | {r['outside']} |")
        for example in r["examples"]:
            a, b = example["value_a"], example["value_b"]
            print(f"|   e.g. {example['group']} {example['quantity']}: {a} vs {b} | | | | |")
    files = differing_files(args.this, args.other)
    print(f"\nversioned files that differ: {len(files)}")
    for name in files:
        print(f"  {name}")
    return 1 if headlines else 0


if __name__ == "__main__":
    sys.exit(main())
