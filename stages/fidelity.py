"""DVC stage fidelity: the papers' headline results beside dpaudit's.

Writes results/fidelity.csv and docs/fidelity.md from the committed results (dpaudit.fidelity). As a
DVC stage it reads each audit's numbers from data/bounds (its declared input); ``--committed`` reads
the git copies under results/ instead, so a clone without the DVC cache regenerates the same page
from committed files only (the fidelity tests compare the page with exactly that).
"""

import sys
from pathlib import Path

from dpaudit.fidelity.table import FIDELITY_CSV, FIDELITY_PAGE, build_fidelity
from dpaudit.pipeline.runner import run_stage


def main() -> None:
    if "--committed" in sys.argv[1:]:
        build_fidelity(Path("."), FIDELITY_CSV, FIDELITY_PAGE, from_bounds=False)
        return

    def body(params: dict) -> None:
        build_fidelity(Path("."), FIDELITY_CSV, FIDELITY_PAGE)

    run_stage("fidelity", body, write_timing=False)


if __name__ == "__main__":
    main()
