"""DVC stage losses@<audit>: per-example losses of the trained models (facts from the manifest)."""

import argparse

from dpaudit.pipeline.runner import run_stage
from dpaudit.pipeline.stages import run_losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("audit", help="an entry of params.yaml 'audits', e.g. adult-identifiability")
    args = parser.parse_args()
    run_stage(f"losses@{args.audit}", lambda params: run_losses(params, args.audit))


if __name__ == "__main__":
    main()
