"""DVC stage check: validate every parameter and input of params.yaml before any other stage does work.

In order: every user-chosen name that becomes a path (:func:`dpaudit.config.check_names`), the whole
file (:func:`dpaudit.pipeline.check_params`), the sizes only the datasets can refuse
(:func:`dpaudit.config.check_limits`), and the Keras files the audits' models come from. Then it
writes the constant marker every stage depends on and one record per audit of its Keras file
(:data:`dpaudit.config.MODEL_RECORDS_DIR`), which that audit's train stage depends on.
"""

import logging
from typing import Any

from dpaudit.config import MODEL_RECORDS_DIR, check_limits, check_names, model_records
from dpaudit.io import atomic_directory, atomic_path, write_json
from dpaudit.layout import CHECK_PATH
from dpaudit.pipeline import CHECK_CONTENT, check_params, run_stage

log = logging.getLogger("dpaudit.stage")


def check(params: dict[str, Any]) -> None:
    """The check stage's body: refuse the first problem by its key, else write the stage's outputs."""
    check_names(params)
    audits = check_params(params)
    check_limits(params, audits)
    records = model_records(params, audits)
    log.info("params valid: %d audit(s): %s", len(audits), ", ".join(a.name for a in audits) or "none")
    with atomic_directory(MODEL_RECORDS_DIR) as out_dir:
        for name, record in records.items():
            write_json(out_dir / f"{name}.json", record)
    with atomic_path(CHECK_PATH) as tmp:
        tmp.write_text(CHECK_CONTENT)


def main() -> None:
    run_stage("check", check)


if __name__ == "__main__":
    main()
