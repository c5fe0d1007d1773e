"""DVC stage target-prepare@<name>: your trained Keras model, its members and non-members, verified
against their DVC digests, as the prepared data of the audit <name>-target."""

import argparse
from pathlib import Path

from dpaudit.pipeline.runner import run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("name", help="an entry of params.yaml target.datasets")
    args = parser.parse_args()

    def body(params: dict) -> None:
        from dpaudit.experiments.target.config import config_from_params
        from dpaudit.experiments.target.design.inputs import prepare_target

        entry = config_from_params(params).model_for(args.name)
        data = Path("data")
        prepare_target(
            args.name,
            entry,
            data / "prepared" / f"{entry.dataset}.npz",
            data / "sensitivity" / f"{entry.dataset}.json",
            data / "prepared" / f"{args.name}.npz",
            data / "sensitivity" / f"{args.name}.json",
        )

    run_stage(f"target-prepare@{args.name}", body)


if __name__ == "__main__":
    main()
