"""DVC stage download@<dataset>: fetch (or copy from the mirror / vendor folder) and verify raw files."""

import argparse
from pathlib import Path

from dpaudit.data.download import download_dataset
from dpaudit.data.prepare import DataConfig
from dpaudit.io import atomic_directory
from dpaudit.pipeline import run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    args = parser.parse_args()

    def body(params: dict) -> None:
        config = DataConfig.from_params(params)
        with atomic_directory(Path("data/raw") / args.dataset) as out_dir:
            download_dataset(args.dataset, out_dir, mirror=config.mirror_path())

    run_stage(f"download@{args.dataset}", body)


if __name__ == "__main__":
    main()
