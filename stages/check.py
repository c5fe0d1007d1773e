"""DVC stage check: validate every parameter and input of params.yaml before any other stage does work
(:func:`dpaudit.pipeline.check.run_check`).

``--validate-only`` runs the same checks and writes nothing (:func:`dpaudit.pipeline.check.run_validate`):
``make run`` calls it before ``dvc repro``, because an ``audits`` entry without a dataset or an
experiment already stops DVC while it reads dvc.yaml (``Could not find 'item.experiment'``), before
this stage could name the key.
"""

import argparse

from dpaudit.pipeline.check import run_check, run_validate
from dpaudit.pipeline.runner import run_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--validate-only", action="store_true", help="check params.yaml, write nothing")
    args = parser.parse_args()
    if args.validate_only:
        run_stage("check --validate-only", run_validate, write_timing=False)
    else:
        run_stage("check", run_check)


if __name__ == "__main__":
    main()
