"""DVC stage prepare@<dataset>: parse raw files, preprocess, draw D / U \\ D / evaluation split."""

import argparse
from pathlib import Path

from dpaudit.data.prepare import DataConfig, prepare_dataset
from dpaudit.pipeline import run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    args = parser.parse_args()

    def body(params: dict) -> None:
        config = DataConfig.from_params(params)
        out_path = Path("data/prepared") / f"{args.dataset}.npz"
        prepare_dataset(args.dataset, Path("data/raw") / args.dataset, config, out_path)

    run_stage(f"prepare@{args.dataset}", body)


if __name__ == "__main__":
    main()
