"""DVC stage download@<dataset>: fetch (or copy from the mirror / vendor folder) and verify raw files."""

import argparse
from pathlib import Path

from dpaudit.data.download import download_dataset
from dpaudit.data.prepare import DataConfig
from dpaudit.pipeline import run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    args = parser.parse_args()

    def body(params: dict) -> None:
        config = DataConfig.from_params(params)
        download_dataset(
            args.dataset,
            Path("data/raw") / args.dataset,
            mirror=config.mirror,
            pool=config.pool_for(args.dataset),
        )

    run_stage(f"download@{args.dataset}", body)


if __name__ == "__main__":
    main()
