"""DVC stage download@<dataset> (fetch, or copy from the mirror / vendor folder, and verify raw files)
and download-custom@<name> (``--custom``: verify the user's file against its ``.dvc`` digest, copy it)."""

import argparse
from pathlib import Path

from dpaudit.data.download import download_dataset
from dpaudit.data.prepare import DataConfig
from dpaudit.pipeline.runner import run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--custom", action="store_true", help="a dataset of data.custom")
    args = parser.parse_args()

    def body(params: dict) -> None:
        config = DataConfig.from_params(params)
        out_dir = Path("data/raw") / args.dataset
        if args.custom:
            from dpaudit.data.custom import download_custom

            download_custom(config.custom_spec(args.dataset), out_dir)
            return
        download_dataset(args.dataset, out_dir, mirror=config.mirror, pool=config.pool_for(args.dataset))

    run_stage(f"download{'-custom' if args.custom else ''}@{args.dataset}", body)


if __name__ == "__main__":
    main()
