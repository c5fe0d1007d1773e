"""DVC stage attack@<audit>: run the audit's adversaries; per-trial scores, guesses and error rates."""

import argparse

from dpaudit.io import atomic_directory
from dpaudit.pipeline import load_audit, run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("audit", help="an entry of params.yaml 'audits', e.g. adult-identifiability")
    args = parser.parse_args()

    def body(params: dict) -> None:
        audit, experiment, config = load_audit(params, args.audit)
        with atomic_directory(audit.attack_dir) as out_dir:
            experiment.run_attack(config, audit, out_dir)

    run_stage(f"attack@{args.audit}", body)


if __name__ == "__main__":
    main()
