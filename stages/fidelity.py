"""DVC stage fidelity: the papers' headline results beside dpaudit's.

Writes results/fidelity.csv and docs/fidelity.md from the committed results (dpaudit.fidelity).
"""

from pathlib import Path

from dpaudit.fidelity.table import FIDELITY_CSV, FIDELITY_PAGE, build_fidelity
from dpaudit.pipeline.runner import run_stage


def main() -> None:
    def body(params: dict) -> None:
        build_fidelity(Path("."), FIDELITY_CSV, FIDELITY_PAGE)

    run_stage("fidelity", body, write_timing=False)


if __name__ == "__main__":
    main()
