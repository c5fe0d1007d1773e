"""Shared experiment pieces: the training knobs and level checked in one place, the defence-kind
tables the canaries and membership stages read, and the seed hash both seed functions share."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import pytest

from dpaudit.config import ParamsError, from_mapping
from dpaudit.experiments.params import LevelParams, TrainingKnobs
from dpaudit.training.defences import DefenceKind, defence_kinds


@dataclass(frozen=True)
class _Train(TrainingKnobs):
    NULL_MEANS = {"delta": "1/|D|"}  # noqa: RUF012 (a plain test double)

    delta: float | None = None
    sampling_rate: float = 0.1
    clip_norm: float = 1.0


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"delta": 1.5}, r"'exp\.train\.delta' = 1\.5 is invalid: must be null \(1/\|D\|\) or lie in"),
        ({"sampling_rate": 0.0}, r"'exp\.train\.sampling_rate' = 0\.0 is invalid: must lie in \(0, 1\]"),
        ({"clip_norm": -1.0}, r"'exp\.train\.clip_norm' = -1\.0 is invalid: must be > 0"),
    ],
)
def test_training_knobs_are_checked_once_with_the_full_key(section: dict, message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        from_mapping(_Train, section, "exp.train")
    assert from_mapping(_Train, {}, "exp.train").delta is None  # null where the experiment allows it


@pytest.mark.parametrize(
    ("experiment", "section", "key"),
    [
        ("canaries", {"train": {"clip_norm": 0}}, "canaries.train.clip_norm"),
        ("identifiability", {"train": {"chunk_size": 0}}, "identifiability.train.chunk_size"),
        ("instantiation", {"bounds": {"confidence": 1}}, "instantiation.bounds.confidence"),
        ("membership", {"train": {"dpsgd": {"learning_rate": 0}}}, "membership.train.dpsgd.learning_rate"),
        ("membership", {"attack": {"confidence": 0}}, "membership.attack.confidence"),
        ("onerun", {"train": {"delta": 0}}, "onerun.train.delta"),
        ("target", {"train": {"clip_norm": 0}}, "target.train.clip_norm"),
        ("target", {"attack": {"confidence": 2}}, "target.attack.confidence"),
    ],
)
def test_every_experiment_uses_the_shared_checks(experiment: str, section: dict, key: str) -> None:
    """Each experiment's smoke section with one shared knob out of range is refused by its full key."""
    import importlib
    from pathlib import Path

    import yaml

    from dpaudit.experiments import registry

    package = Path(importlib.import_module(f"dpaudit.experiments.{experiment}").__file__).parent
    base = yaml.safe_load((package / "smoke.yaml").read_text())[experiment]

    def merged(a: dict, b: dict) -> dict:
        return {**a, **{k: merged(a.get(k, {}), v) if isinstance(v, dict) else v for k, v in b.items()}}

    data = {"data": {"datasets": ["adult"]}}
    registry()[experiment].config_from_params({**data, experiment: base})
    with pytest.raises(ParamsError, match=rf"'{key}' = .* is invalid: must "):
        registry()[experiment].config_from_params({**data, experiment: merged(base, section)})


def test_level_params_default_and_range() -> None:
    assert LevelParams().confidence == 0.95
    with pytest.raises(ParamsError, match="'b.confidence' = 0.0 is invalid"):
        from_mapping(LevelParams, {"confidence": 0.0}, "b")


def test_defence_kind_tables_name_what_the_stages_read() -> None:
    from dpaudit.experiments.canaries.design import DEFENCE_KINDS, defences_for
    from dpaudit.experiments.membership.design import STRATEGY_KINDS

    assert {k for k, d in DEFENCE_KINDS.items() if d.private} == {"dpsgd"}
    assert {k for k, d in DEFENCE_KINDS.items() if d.label_only} == {"heuristic"}
    assert {k for k, d in DEFENCE_KINDS.items() if d.undefended} == {"undefended"}
    assert all(d.spec is DEFENCE_KINDS[d.kind] for d in defences_for([1.0], 0.1))
    assert {k for k, d in STRATEGY_KINDS.items() if d.private} == {"dp"}
    assert {k for k, d in STRATEGY_KINDS.items() if not d.neural} == {"xgboost"}
    with pytest.raises(ValueError, match="unique"):
        defence_kinds(DefenceKind("a", "x"), DefenceKind("a", "y"))


def test_both_setting_seeds_keep_their_values() -> None:
    """The shared hash changed no seed: both functions give what their earlier bodies gave."""
    from dpaudit.data.worlds import setting_seed
    from dpaudit.experiments.onerun.design import setting_seed as onerun_seed

    def digest(text: str) -> int:
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF

    values = {"seed": 0, "canaries": 1000, "dataset": "adult"}
    assert onerun_seed(values) == digest(json.dumps(values, sort_keys=True, default=str)) == 1214133618
    assert setting_seed(0, "identifiability", 0.9, "local", "bounded") == 2143369067
    assert setting_seed(0, "identifiability", 0.9, "local", "bounded") == digest(
        repr((0, "identifiability", 0.9, "local", "bounded"))
    )
