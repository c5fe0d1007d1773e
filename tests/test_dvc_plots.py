"""`dvc plots show/diff` warn for every field a plot names that its CSV lacks: none may be stale."""

from __future__ import annotations

import csv
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_every_plot_field_is_a_column_of_its_committed_csv():
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))
    stale = []
    for entry in spec.get("plots", []):
        for name, plot in entry.items():
            for path, columns in plot["y"].items():
                file = REPO / path
                assert file.is_file(), f"plot {name}: {path} is not committed (run the pipeline)"
                with file.open(newline="", encoding="utf-8") as handle:
                    header = next(csv.reader(handle))
                wanted = [columns] if isinstance(columns, str) else list(columns)
                stale += [
                    f"{name}: {path} has no column {c!r}"
                    for c in [*wanted, plot.get("x")]
                    if c and c not in header
                ]
    assert not stale, "\n".join(stale)
