"""DVC stage train@<audit>: train the audit's models; write them and the train manifest."""

import argparse

from dpaudit.pipeline.runner import run_stage
from dpaudit.pipeline.train import run_train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("audit", help="an entry of params.yaml 'audits', e.g. adult-identifiability")
    args = parser.parse_args()
    run_stage(f"train@{args.audit}", lambda params: run_train(params, args.audit))


if __name__ == "__main__":
    main()
