"""DVC stage sensitivity@<dataset>: the records of D (and U \\ D) that differ most (Bernau Def. 6)."""

import argparse
from pathlib import Path

from dpaudit.data.prepared import PreparedData
from dpaudit.pipeline import run_stage
from dpaudit.sensitivity.search import SensitivityConfig, run_sensitivity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    args = parser.parse_args()

    def body(params: dict) -> None:
        config = SensitivityConfig.from_params(params)
        prepared = PreparedData.load(Path("data/prepared") / f"{args.dataset}.npz")
        run_sensitivity(prepared, config, Path("data/sensitivity") / f"{args.dataset}.json")

    run_stage(f"sensitivity@{args.dataset}", body)


if __name__ == "__main__":
    main()
