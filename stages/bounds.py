"""DVC stage bounds@<audit>: ε upper bounds, valid ε lower bounds, identifiability scores, plots."""

import argparse

from dpaudit.io import atomic_directory, atomic_path
from dpaudit.pipeline import load_audit, run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("audit", help="an entry of params.yaml 'audits', e.g. adult-identifiability")
    args = parser.parse_args()

    def body(params: dict) -> None:
        audit, experiment, config = load_audit(params, args.audit)
        with (
            atomic_path(audit.metrics_path) as metrics_path,
            atomic_directory(audit.plots_dir) as plots_dir,
            atomic_path(audit.section_path) as section_path,
        ):
            experiment.run_bounds(config, audit, metrics_path, plots_dir, section_path)

    run_stage(f"bounds@{args.audit}", body)


if __name__ == "__main__":
    main()
