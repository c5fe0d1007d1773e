"""DVC stage train@<audit>: train the audit's models and record what each adversary may observe."""

import argparse

from dpaudit.io import atomic_directory
from dpaudit.pipeline import load_audit, run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("audit", help="an entry of params.yaml 'audits', e.g. adult-identifiability")
    args = parser.parse_args()

    def body(params: dict) -> None:
        audit, experiment, config = load_audit(params, args.audit)
        with atomic_directory(audit.train_dir) as out_dir:
            experiment.run_train(config, audit, out_dir)

    run_stage(f"train@{args.audit}", body)


if __name__ == "__main__":
    main()
