"""A fake repository tree with two audit sections, their CSVs, metrics and a raw file."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpaudit.io import write_json
from dpaudit.results import FigureSpec, ReportSection, SummaryRow, TableSpec

AUDITS = ("adult-membership", "digits-identifiability")
RAW_BYTES = b"39, State-gov, 77516, Bachelors\n"
VENDORED_NAMES = Path(__file__).resolve().parents[2] / "data" / "vendor" / "adult" / "adult.names.gz"


def _identifiability_section(root: Path) -> ReportSection:
    rng = np.random.default_rng(0)
    plots = root / "plots" / "digits-identifiability"
    plots.mkdir(parents=True)
    beliefs = pd.DataFrame(
        {
            "belief": np.clip(np.concatenate([rng.beta(6, 3, 200), rng.beta(3, 3, 200)]), 0, 1),
            "sensitivity": ["global"] * 200 + ["local"] * 200,
            "rho_beta": [0.9] * 400,
        }
    )
    beliefs.to_csv(plots / "beliefs.csv", index=False)
    eps = pd.DataFrame(
        {
            "epsilon": [0.08, 1.1, 2.2, 4.6] * 2,
            "epsilon_prime": [0.05, 0.9, 1.8, 3.1, 0.07, 1.0, 2.1, 4.4],
            "neighbours": ["bounded"] * 4 + ["unbounded"] * 4,
        }
    )
    eps.to_csv(plots / "epsilon_prime.csv", index=False)
    rows = [
        SummaryRow(
            f"rho_beta={rb}",
            {"rdp": e, "pld": e * 0.97},
            e * 0.6,
            "clopper-pearson",
            {"rho_beta": rb, "rho_alpha": ra},
            "accuracy",
            0.8,
        )
        for rb, e, ra in [(0.52, 0.08, 0.01), (0.75, 1.1, 0.12), (0.9, 2.2, 0.23), (0.99, 4.6, 0.46)]
    ]
    return ReportSection(
        dataset="digits",
        experiment="identifiability",
        title="Identifiability (Bernau et al.)",
        description="Full-batch DP-SGD on D vs D' <chosen by sensitivity>.",
        headline=rows[2],
        rows=rows,
        scores={"rho_beta": "ρβ", "rho_alpha": "ρα"},
        tables=[
            TableSpec(
                "adv",
                "Adv and δ′ by sensitivity × neighbours",
                ["sensitivity", "bounded", "unbounded"],
                [["global", 0.11, 0.12], ["local", 0.21, 0.23]],
                caption="Bernau Table 2 layout",
            )
        ],
        figures=[
            FigureSpec(
                "beliefs",
                "Posterior beliefs",
                "histogram",
                "plots/digits-identifiability/beliefs.csv",
                "belief",
                [],
                "final belief β_k",
                "trials",
                group="sensitivity",
                hlines={"rho_beta": 0.9},
            ),
            FigureSpec(
                "eps",
                "ε′ vs ε",
                "line",
                "plots/digits-identifiability/epsilon_prime.csv",
                "epsilon",
                ["epsilon_prime"],
                "target ε",
                "empirical ε′",
                group="neighbours",
                diagonal=True,
            ),
        ],
    )


def _membership_section(root: Path) -> ReportSection:
    plots = root / "plots" / "adult-membership"
    plots.mkdir(parents=True)
    utility = pd.DataFrame(
        {
            "epsilon": [0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
            "accuracy": [0.70, 0.76, 0.75, 0.81, 0.80, 0.83],
            "model": ["dp"] * 5 + ["xgboost"],
            "pareto": [True, True, False, True, False, True],
        }
    )
    utility.to_csv(plots / "privacy_utility.csv", index=False)
    roc = pd.DataFrame(
        {"fpr": np.linspace(0, 1, 11), "tpr": np.linspace(0, 1, 11) ** 0.7, "noise": ["z=1"] * 11}
    )
    roc = pd.concat([roc, roc.assign(tpr=np.linspace(0, 1, 11) ** 0.9, noise="z=4")])
    roc.to_csv(plots / "roc.csv", index=False)
    region = pd.DataFrame(
        {
            "noise_multiplier": [0.5, 1, 2, 4, 8, 0.5, 1, 2, 4, 8],
            "epsilon": [50, 12, 3.1, 0.9, 0.3, 1.2, 0.8, 0.3, 0.05, 0.01],
            "bound": ["upper (rdp)"] * 5 + ["lower"] * 5,
            "dataset_split": ["train"] * 10,
        }
    )
    region.to_csv(plots / "region.csv", index=False)
    rotated = pd.DataFrame(
        {
            "noise": ["z=1", "z=1", "z=4", "z=4"],
            "accountant": ["rdp", "naive"] * 2,
            "epsilon": [12.0, 125.0, 0.9, 4.1],
        }
    )
    rotated.to_csv(plots / "rotated.csv", index=False)
    headline = SummaryRow(
        "z=1.0",
        {"rdp": 12.0, "pld": 11.1, "naive": 125.0, "advanced": 40.0},
        0.8,
        "loss-threshold (split)",
        {"epsilon_star": 0.42},
        "accuracy",
        0.81,
        "independent fair-coin inclusion",
    )
    baseline = SummaryRow(
        "non-DP keras", {}, 1.9, "loss-threshold (split)", {"epsilon_star": 2.5}, "accuracy", 0.84
    )
    return ReportSection(
        dataset="adult",
        experiment="membership",
        title="Membership inference",
        description="Loss threshold MI.",
        headline=headline,
        rows=[headline, baseline],
        scores={"epsilon_star": "Epsilon*"},
        timings={"train": 12.5},
        tables=[],
        figures=[
            FigureSpec(
                "utility",
                "Privacy–utility",
                "scatter",
                "plots/adult-membership/privacy_utility.csv",
                "epsilon",
                ["accuracy"],
                "ε (rdp)",
                "test accuracy",
                group="model",
                x_log=True,
                highlight="pareto",
            ),
            FigureSpec(
                "roc",
                "ROC",
                "step",
                "plots/adult-membership/roc.csv",
                "fpr",
                ["tpr"],
                "FPR",
                "TPR",
                group="noise",
                diagonal=True,
            ),
            FigureSpec(
                "region",
                "Region of privacy",
                "line",
                "plots/adult-membership/region.csv",
                "noise_multiplier",
                ["epsilon"],
                "noise multiplier z",
                "ε",
                group="bound",
                x_log=True,
                y_log=True,
                facet="dataset_split",
            ),
            FigureSpec(
                "rotated",
                "Rotated table",
                "bar",
                "plots/adult-membership/rotated.csv",
                "noise",
                ["epsilon"],
                "noise",
                "ε",
                group="accountant",
                y_log=True,
            ),
        ],
    )


def make_fake_root(root: Path) -> Path:
    """Write sections (one with a train time), CSVs, metrics, params and one raw data file under ``root``."""
    for section in (_identifiability_section(root), _membership_section(root)):
        section.save(root / "data" / "bounds" / f"{section.dataset}-{section.experiment}" / "section.json")
    write_json(
        root / "data" / "bounds" / "adult-membership" / "metrics.json",
        {"epsilon_upper": {"z_1.0": {"rdp": 12.0}}, "epsilon_lower": {"z_1.0": 0.8}},
    )
    adult = root / "data" / "raw" / "adult"
    adult.mkdir(parents=True)
    shutil.copyfile(VENDORED_NAMES, adult / "adult.names.gz")  # the real file: matches the registry
    (adult / "adult.test.gz").write_bytes(RAW_BYTES)  # wrong content under a registered name
    write_json(adult / "manifest.json", {"dataset": "adult", "files": {}})
    write_json(
        root / "data" / "raw" / "digits" / "manifest.json",
        {"dataset": "digits", "note": "ships with sklearn"},
    )
    (root / "params.yaml").write_text("report:\n  title: fake <report>\n")
    return root


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    return make_fake_root(tmp_path / "repo")


@pytest.fixture(scope="session")
def built_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The fake tree rendered once: (root, reports/index.html, metrics/summary.json). Read-only."""
    from dpaudit.report.render import build_report

    root = make_fake_root(tmp_path_factory.mktemp("built") / "repo")
    out, summary = root / "reports" / "index.html", root / "metrics" / "summary.json"
    build_report(root, out, summary, "fake <report>", audits=list(AUDITS))
    return root, out, summary
