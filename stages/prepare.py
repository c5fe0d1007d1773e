"""DVC stage prepare@<dataset>: parse raw files, preprocess, draw D / U \\ D / evaluation split;
prepare-custom@<name> (``--custom``) encodes the user's file and writes its provenance next to it."""

import argparse
from pathlib import Path

from dpaudit.data.prepare import DataConfig, prepare_dataset
from dpaudit.pipeline.runner import run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--custom", action="store_true", help="a dataset of data.custom")
    args = parser.parse_args()

    def body(params: dict) -> None:
        config = DataConfig.from_params(params)
        raw_dir = Path("data/raw") / args.dataset
        out_path = Path("data/prepared") / f"{args.dataset}.npz"
        if args.custom:
            from dpaudit.data.custom import prepare_custom_stage

            prepare_custom_stage(config.custom_spec(args.dataset), raw_dir, out_path)
            return
        prepare_dataset(args.dataset, raw_dir, config, out_path)

    run_stage(f"prepare{'-custom' if args.custom else ''}@{args.dataset}", body)


if __name__ == "__main__":
    main()
