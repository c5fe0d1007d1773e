"""The published heuristics' evaluation: the pick is paid for, the matched DP-SGD setting, the top
natural records chosen and measured on disjoint targets."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.experiments.canaries.design import balanced_membership
from dpaudit.experiments.canaries.design.heuristics import (
    ADAPTIVE_ATTACKS,
    evaluate,
    matched_dpsgd,
    metrics,
    plot_rows,
    top_natural,
)
from dpaudit.scores import ScoreSet

M = 64


def _set(defence: str, attack: str, ctype: str, scores: np.ndarray, member: np.ndarray) -> ScoreSet:
    k, m = np.meshgrid(np.arange(scores.shape[0]), np.arange(M), indexing="ij")
    return ScoreSet({"defence": defence, "attack": attack, "canary_type": ctype}, scores.ravel(),
                    member.ravel(), ("rates",), arrays={"canary": k.ravel(), "model": m.ravel()})  # fmt: skip


def _info() -> dict:
    return {
        "undefended": {"kind": "undefended", "label": "undefended", "accuracy": 0.96},
        "dpsgd-z2": {"kind": "dpsgd", "label": "DP-SGD z=2", "accuracy": 0.86},
        "dpsgd-z0.5": {"kind": "dpsgd", "label": "DP-SGD z=0.5", "accuracy": 0.948},
        "dpsgd-utility": {"kind": "dpsgd", "label": "DP-SGD utility", "accuracy": 0.952},
        "relaxloss": {"kind": "relaxloss", "label": "RelaxLoss", "accuracy": 0.94},
    }


def test_matched_dpsgd_is_the_noisiest_setting_at_least_as_accurate() -> None:
    info = _info()
    assert matched_dpsgd(info, 0.94) == "dpsgd-z0.5"
    assert matched_dpsgd(info, 0.95) == "dpsgd-utility"
    assert matched_dpsgd(info, 0.99) == "dpsgd-utility"  # none reaches: the most accurate
    assert matched_dpsgd({"u": info["undefended"]}, 0.9) is None


def _sets(rng: np.random.Generator, signal: float) -> list[ScoreSet]:
    sets = []
    for ctype, n, shift in (("clean", 70, 0.0), ("mislabeled", 50, signal), ("ood", 20, 0.0)):
        member = balanced_membership(n, M, rng)
        for attack in (*ADAPTIVE_ATTACKS, "threshold_confidence"):
            scores = rng.normal(size=(n, M)) + shift * member
            sets.append(_set("relaxloss", attack, ctype, scores, member))
        for d in ("dpsgd-z0.5", "dpsgd-utility"):
            for attack in ("lira_online_logit", "lira_online_hinge"):
                sets.append(_set(d, attack, ctype, rng.normal(size=(n, M)), member))
    return sets


def test_strong_canaries_are_found_above_a_null_population() -> None:
    rng = np.random.default_rng(0)
    (row,) = evaluate(_sets(rng, 4.0), _info(), [0.001, 0.01], 0.01, 0.95)
    assert row["best_type"] == "mislabeled" and row["candidates"] == 2 * len(ADAPTIVE_ATTACKS)
    assert row["canary"]["0.01"]["value"] > 0.8 and row["population"]["0.01"]["value"] < 0.05
    assert row["canary_above_population"] and row["joint_canary_low"] > row["joint_population_high"]
    # The joint limit is wider than the plain 95 % one: the pick among the candidates is paid for.
    assert row["joint_canary_low"] < row["canary"]["0.01"]["low"]
    assert row["dpsgd"]["defence"] == "dpsgd-z0.5" and row["dpsgd"]["reaches_accuracy"]
    assert row["criterion_holds"]
    flat = metrics(row, [0.001, 0.01])
    assert flat["canary_tpr_at_fpr_0p001"] == row["canary"]["0.001"]["value"]
    assert flat["canary_above_population"] == 1.0 and flat["matched_dpsgd_test_accuracy"] == 0.948
    assert [r["kind"] for r in plot_rows([row], [0.001, 0.01])] == ["heuristic", "DP-SGD"]


def test_with_no_signal_the_gap_is_not_claimed() -> None:
    claimed = 0
    for seed in range(20):
        (row,) = evaluate(_sets(np.random.default_rng(seed), 0.0), _info(), [0.01], 0.01, 0.95)
        claimed += row["canary_above_population"]
    assert claimed == 0


def test_top_natural_records_are_chosen_on_even_targets_only() -> None:
    rng = np.random.default_rng(3)
    member = balanced_membership(40, M, rng)
    scores = rng.normal(size=(40, M))
    odd = np.arange(M) % 2 == 1
    scores[:5] += 6.0 * member[:5] * odd  # records 0–4 leak on odd targets only: never selected
    scores[5:10] += 3.0 * member[5:10] * ~odd  # records 5–9 leak on even targets: selected
    top = top_natural(_set("d", "a", "clean", scores, member), share=0.125)
    assert sorted(top.tolist()) == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("share", [0.05, 0.5])
def test_top_natural_keeps_the_share(share: float) -> None:
    rng = np.random.default_rng(4)
    member = balanced_membership(40, M, rng)
    top = top_natural(_set("d", "a", "clean", rng.normal(size=(40, M)), member), share=share)
    assert top.size == round(share * 40)


def test_committed_run_meets_the_acceptance(repo_root) -> None:
    """The committed default run: the label-only attack is near chance on clean records (its old
    unequal-count estimator gave AUROC 0.11 there), every heuristic reaches the utility target, and
    RMIA's bounds go through the counted per-model rules."""
    import json

    results = json.loads((repo_root / "results" / "digits-canaries.json").read_text())
    clean = results["canary_type=clean/defence=label-only/attack=label_only"]
    assert 0.45 <= clean["auroc"] <= 0.55
    assert set(results["heuristics"]) == {"relaxloss", "selena", "hamp"}
    for row in results["heuristics"].values():
        assert row["test_accuracy"] >= 0.93
    rmia = results["canary_type=mislabeled/defence=undefended/attack=rmia_offline_r1"]
    assert "tpr_at_fpr_0p001" in rmia and "epsilon_lower_per_model_sweep_split" in rmia


def test_the_rmia_comparison_reads_the_undefended_rows_of_the_table() -> None:
    from dpaudit.experiments.canaries.design.comparison import COMPARED, reference_comparison
    from dpaudit.scores import group_key
    from dpaudit.table import ResultRow, ResultsTable

    rows = []
    for defence, value in (("undefended", 0.4), ("relaxloss", 0.9)):
        for i, attack in enumerate(COMPARED):
            group = group_key(canary_type="ood", defence=defence, attack=attack)
            rows.append(ResultRow(group, "tpr_at_fpr_0p001", value + i / 100, "rates", "rate",
                                  0.95, value - 0.1, value + 0.1))  # fmt: skip
    (row,) = reference_comparison(ResultsTable(rows), _info(), 0.001)
    assert row["canary_type"] == "ood" and list(row)[1:] == list(COMPARED)
    assert [row[a]["value"] for a in COMPARED] == pytest.approx([0.4 + i / 100 for i in range(len(COMPARED))])
    assert row[COMPARED[0]]["low"] == pytest.approx(0.3)
