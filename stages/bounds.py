"""DVC stage bounds@<audit>: ε upper and lower bounds, scores, plots and the report section."""

import argparse

from dpaudit.pipeline.runner import run_stage
from dpaudit.pipeline.stages import run_bounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("audit", help="an entry of params.yaml 'audits', e.g. adult-identifiability")
    args = parser.parse_args()
    run_stage(f"bounds@{args.audit}", lambda params: run_bounds(params, args.audit))


if __name__ == "__main__":
    main()
