"""DVC stage sensitivity@<dataset>: the records of D (and U \\ D) that differ most (Bernau Def. 6);
sensitivity-custom@<name> (``--custom``) uses the measure of ``data.custom.<name>.measure``."""

import argparse
from pathlib import Path

from dpaudit.data.prepared import PreparedData
from dpaudit.pipeline.runner import run_stage
from dpaudit.sensitivity.search import SensitivityConfig, run_sensitivity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--custom", action="store_true", help="a dataset of data.custom")
    args = parser.parse_args()

    def body(params: dict) -> None:
        config = SensitivityConfig.from_params(params)
        measure = None
        if args.custom:
            from dpaudit.data.prepare import DataConfig

            measure = DataConfig.from_params(params).custom_spec(args.dataset).measure
        prepared = PreparedData.load(Path("data/prepared") / f"{args.dataset}.npz")
        run_sensitivity(prepared, config, Path("data/sensitivity") / f"{args.dataset}.json", measure=measure)

    run_stage(f"sensitivity{'-custom' if args.custom else ''}@{args.dataset}", body)


if __name__ == "__main__":
    main()
