"""DVC stage attack@<audit>: run the audit's adversaries; per-trial scores and guesses."""

import argparse

from dpaudit.pipeline.runner import run_stage
from dpaudit.pipeline.stages import run_attack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("audit", help="an entry of params.yaml 'audits', e.g. adult-identifiability")
    args = parser.parse_args()
    run_stage(f"attack@{args.audit}", lambda params: run_attack(params, args.audit))


if __name__ == "__main__":
    main()
