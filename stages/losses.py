"""DVC stage losses@<audit>: per-example losses of the final models on members, non-members, targets."""

import argparse

from dpaudit.io import atomic_path
from dpaudit.pipeline import load_audit, run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("audit", help="an entry of params.yaml 'audits', e.g. adult-membership")
    args = parser.parse_args()

    def body(params: dict) -> None:
        audit, experiment, config = load_audit(params, args.audit)
        with atomic_path(audit.losses_path) as out_path:
            experiment.run_losses(config, audit, out_path)

    run_stage(f"losses@{args.audit}", body)


if __name__ == "__main__":
    main()
