"""The experiment layer's shared pieces: DpEvent JSON, the train manifest, epsilons_for_event, the game."""

from __future__ import annotations

import math
from pathlib import Path

import dp_accounting
import numpy as np
import pytest

from dpaudit.bounds.accountants import ACCOUNTANTS, all_epsilons, epsilons_for_event
from dpaudit.data.worlds import draw_worlds, neighbour_masks, population, settings_grid, world_masks
from dpaudit.experiments.base import (
    Mechanism,
    TrainManifest,
    event_from_json,
    event_to_json,
    read_manifest,
    write_manifest,
)
from dpaudit.layout import Audit
from dpaudit.references import REFERENCES


@pytest.mark.parametrize(
    "event",
    [
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.5)), 100
        ),
        dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 30),
        dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(1.0), dp_accounting.NoOpDpEvent()]),
        dp_accounting.NonPrivateDpEvent(),
    ],
)
def test_events_survive_json(event: object) -> None:
    import json

    assert event_from_json(json.loads(json.dumps(event_to_json(event)))) == event


def test_unknown_event_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown dp_accounting event type 'os'"):
        event_from_json({"type": "os"})


def test_epsilons_for_event_equal_the_accountants_for_dpsgd() -> None:
    """DP-SGD as an event gives exactly the (z, q, T) accountants' ε; baselines give ∞, no-ops 0."""
    delta = 1e-5
    for z, q, steps in ((1.0, 0.1, 100), (3.0, 1.0, 30)):
        event = Mechanism.dpsgd(z, q, steps, 1.0).dp_event()
        assert epsilons_for_event(event, delta) == all_epsilons(z, q, steps, delta)
    assert epsilons_for_event(dp_accounting.NonPrivateDpEvent(), delta) == {a: math.inf for a in ACCOUNTANTS}
    assert epsilons_for_event(dp_accounting.NoOpDpEvent(), delta) == {a: 0.0 for a in ACCOUNTANTS}
    with pytest.raises(ValueError, match="unsupported event LaplaceDpEvent"):
        epsilons_for_event(dp_accounting.LaplaceDpEvent(1.0), delta)


def test_manifest_round_trip(tmp_path: Path) -> None:
    audit = Audit("adult", "membership", tmp_path)
    manifest = TrainManifest(
        experiment="membership",
        dataset="adult",
        delta=1e-4,
        sizes={"members": 10},
        seeds={"seed": 3},
        mechanisms={"dp": Mechanism.dpsgd(1.0, 0.5, 4, 2.0), "base": Mechanism.non_private(4, 0.5)},
        facts={"hidden": [4]},
        seconds=1.5,
    )
    write_manifest(audit.train_dir, manifest)
    assert read_manifest(audit) == manifest
    raw = audit.manifest_path.read_text().replace('"version": 1', '"version": 0')
    audit.manifest_path.write_text(raw)
    with pytest.raises(ValueError, match="rerun the train stage"):
        read_manifest(audit)


def test_game_worlds_masks_and_grid() -> None:
    X, y = np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10) % 2
    pop = population(X, y, train_idx=[0, 1, 2, 3], extra=[7, 2, 7])
    assert pop.n == 4 and pop.rows == {0: 0, 1: 1, 2: 2, 3: 3, 7: 4} and len(pop.X) == 5
    d, d_prime = neighbour_masks(pop, removed=1, added=4)
    assert d.tolist() == [True] * 4 + [False] and d_prime.tolist() == [True, False, True, True, True]
    uniform = draw_worlds([0, 1], 1000)
    assert np.array_equal(uniform, np.random.default_rng([0, 1]).integers(0, 2, 1000))
    balanced = draw_worlds([0, 1], 11, balanced=True)
    assert balanced.sum() == 6 and np.array_equal(balanced, draw_worlds([0, 1], 11, balanced=True))
    masks = world_masks(np.array([1, 0]), d, d_prime)
    assert masks[0].tolist() == d.tolist() and masks[1].tolist() == d_prime.tolist()
    grid = settings_grid({"a": [1, 2], "b": ["x", "y"]})
    assert grid == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]


def test_bibliography_has_every_cited_paper() -> None:
    keys = {"BERNAU", "ERLINGSSON", "NEGOESCU", "NASR_2021", "AERNI", "NASR_2023", "STEINKE_NASR_JAGIELSKI",
            "ABADI", "KAIROUZ", "YEOM", "DONG_ROTH_SU"}  # fmt: skip
    assert set(REFERENCES) == keys
    for ref in REFERENCES.values():
        assert ref.title and ref.authors and ref.venue and 2010 < ref.year < 2030
        assert ref.url.startswith("https://arxiv.org/abs/") and ref.arxiv in ref.cite()
