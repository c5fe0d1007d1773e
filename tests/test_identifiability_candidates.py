"""Bernau Fig. 4 candidates: each record in one list only; a flag when top and bottom do not separate."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dpaudit.data.worlds import Population
from dpaudit.experiments.identifiability import train as train_module
from dpaudit.experiments.identifiability.bounds import (
    candidate_separation,
    candidate_summary,
    separation_sentences,
)
from dpaudit.experiments.identifiability.config import IdentifiabilityConfig
from dpaudit.experiments.identifiability.design import fig4_candidates
from dpaudit.experiments.identifiability.report import candidate_table, candidate_warnings
from dpaudit.sensitivity.search import (
    BoundedChoice,
    Candidate,
    PairCandidate,
    SensitivityResult,
    UnboundedChoice,
)


def _digits_search() -> SensitivityResult:
    """The digits search of the default pipeline: record #1436 heads a top pair and a bottom pair."""
    top = [PairCandidate(600, 141, 4.586), PairCandidate(1436, 1259, 4.560), PairCandidate(600, 172, 4.555)]
    bottom = [PairCandidate(1471, 1485, 0.512), PairCandidate(1436, 1505, 0.625),
              PairCandidate(567, 573, 0.631)]  # fmt: skip
    return SensitivityResult(
        dataset="digits",
        measure="euclidean",
        unbounded=UnboundedChoice(
            77, 345.8,
            [Candidate(77, 345.8), Candidate(689, 342.5), Candidate(1495, 338.9)],
            [Candidate(1363, 271.7), Candidate(829, 273.2), Candidate(405, 273.9)],
        ),
        bounded=BoundedChoice(600, 141, 4.586, top, bottom),
    )  # fmt: skip


def _records(cands, nb: str, end: str) -> set[int]:
    return {g for c in cands if c.neighbours == nb and c.end == end for g in c.records}


def test_no_record_is_both_a_top_and_a_bottom_candidate() -> None:
    cands = fig4_candidates(_digits_search())
    for nb in ("unbounded", "bounded"):
        assert not _records(cands, nb, "top") & _records(cands, nb, "bottom")
    bounded_bottom = [(c.rank, c.records) for c in cands if c.neighbours == "bounded" and c.end == "bottom"]
    assert bounded_bottom == [(1, (1471, 1485)), (3, (567, 573))]  # #1436's bottom pair is dropped
    assert len([c for c in cands if c.neighbours == "bounded" and c.end == "top"]) == 3
    assert len([c for c in cands if c.neighbours == "unbounded"]) == 6


def test_train_stage_runs_disjoint_candidates(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The candidate runs the train stage asks for never hold one record in both lists."""
    seen: dict[str, object] = {}

    def fake_runs(model, pop, candidates, trials, z, **kwargs):
        seen.update(candidates=candidates, trials=trials)
        return None

    monkeypatch.setattr(train_module, "candidate_runs", fake_runs)
    sens = _digits_search()
    records = sorted({77, 689, 1495, 1363, 829, 405, 600, 1436, 1471, 567, 141, 1259, 172, 1485, 1505, 573})
    pop = Population(np.zeros((len(records), 2), np.float32), np.zeros(len(records), np.int64),
                     {g: i for i, g in enumerate(records)}, len(records))  # fmt: skip
    audit = SimpleNamespace(dataset="digits", name="digits-identifiability")
    result = train_module._train_candidates(IdentifiabilityConfig(), audit, None, pop, sens, 0.01, tmp_path)
    assert result is None and seen["trials"] == 20
    cands = seen["candidates"]
    assert not _records(cands, "bounded", "top") & _records(cands, "bounded", "bottom")
    assert (1436, 1505) not in [c.records for c in cands]


def _arrays(per_trial: dict[tuple[str, str, int, int], list[float]], steps: int = 3) -> dict[str, np.ndarray]:
    """Candidates-file arrays whose trials have the given mean LS_i (constant over ``steps`` steps)."""
    ls, nb, end, rank, index = [], [], [], [], []
    for (n, e, r, i), values in per_trial.items():
        for v in values:
            ls.append([v] * steps)
            nb.append(n), end.append(e), rank.append(r), index.append(i)
    return {"ls": np.asarray(ls), "neighbours": np.asarray(nb), "end": np.asarray(end),
            "rank": np.asarray(rank), "index": np.asarray(index)}  # fmt: skip


def test_summary_mean_and_student_t_interval() -> None:
    frame = candidate_summary(_arrays({("bounded", "top", 1, 5): [1.0, 2.0, 3.0]}), 0.95)
    row = frame.iloc[0]
    half = 4.302652729911275 / math.sqrt(3)  # t_{0.975, 2} · s / √n with s = 1
    assert (row["mean_ls"], row["trials"], row["index"]) == (pytest.approx(2.0), 3, 5)
    assert (row["low"], row["high"]) == (pytest.approx(2.0 - half), pytest.approx(2.0 + half))
    with pytest.raises(ValueError, match="needs 2 trials"):
        candidate_summary(_arrays({("bounded", "top", 1, 5): [1.0]}), 0.95)


def test_separation_flags_overlap_and_inversion() -> None:
    apart = {("unbounded", "top", 1, 1): [5.0, 5.1, 4.9], ("unbounded", "bottom", 1, 2): [1.0, 1.1, 0.9]}
    overlap = {("unbounded", "top", 1, 1): [3.0, 5.0, 4.0], ("unbounded", "bottom", 1, 2): [2.0, 4.0, 3.0]}
    # The adult failure: a bounded bottom candidate (mean LS 4.0) above every top one (≤ 2.9).
    inverted = {
        ("bounded", "top", 1, 10): [2.9, 3.0, 2.8],
        ("bounded", "top", 2, 11): [2.5, 2.6, 2.4],
        ("bounded", "bottom", 1, 43783): [4.0, 4.1, 3.9],
        ("bounded", "bottom", 2, 37543): [1e-5, 1.1e-5, 0.9e-5],
    }
    assert candidate_separation(candidate_summary(_arrays(apart), 0.95))["unbounded"]["separated"] == 1.0
    # Means in order (4 > 3) but the intervals overlap: not separated.
    overlap_frame = candidate_summary(_arrays(overlap), 0.95)
    sep = candidate_separation(overlap_frame)["unbounded"]
    assert sep["top_min_mean"] > sep["bottom_max_mean"] and sep["separated"] == 0.0
    (sentence,) = separation_sentences({"unbounded": sep}, overlap_frame.to_dict("records"))
    assert "intervals overlap" in sentence
    frame = candidate_summary(_arrays(inverted), 0.95)
    sep = candidate_separation(frame)
    assert sep["bounded"]["separated"] == 0.0
    assert sep["bounded"]["bottom_max_mean"] == pytest.approx(4.0)
    assert sep["bounded"]["top_min_mean"] == pytest.approx(2.5)
    assert (sep["bounded"]["top_count"], sep["bounded"]["bottom_count"]) == (2.0, 2.0)
    sentences = separation_sentences(sep, frame.to_dict("records"))
    assert len(sentences) == 1 and "do not separate" in sentences[0] and "#43783" in sentences[0]
    assert "did not rank D′ by identifiability" in sentences[0]
    assert separation_sentences(candidate_separation(candidate_summary(_arrays(apart), 0.95)), []) == []


def test_report_warns_and_tabulates_from_the_bounds_context() -> None:
    inverted = {("bounded", "top", 1, 10): [2.9, 3.0, 2.8], ("bounded", "bottom", 1, 43783): [4.0, 4.1, 3.9]}
    frame = candidate_summary(_arrays(inverted), 0.95)
    context = {"candidate_rows": frame.to_dict("records"),
               "candidate_separation": candidate_separation(frame)}  # fmt: skip
    json.dumps(context, allow_nan=False)  # the section and results files are strict JSON
    warnings = candidate_warnings(context)
    assert len(warnings) == 1 and warnings[0].startswith("Warning (bounded neighbours)")
    table = candidate_table(context, 0.95)
    assert table is not None and [row[-1] for row in table.rows] == ["NO", "NO"]
    assert table.rows[1][:4] == ["bounded", "bottom", 1, "#43783"]
    assert candidate_warnings({}) == [] and candidate_table({}, 0.95) is None
