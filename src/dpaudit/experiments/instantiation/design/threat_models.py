"""The six threat models of Nasr et al. 2021, Table I (:data:`dpaudit.references.NASR_2021`), under
their earlier single import path.

The code lives in :mod:`.game` (the shared :class:`Game` and view helpers), :mod:`.crafters` (one
module per crafter group, with each threat model's ``play_*`` function), :mod:`.distinguishers` and
:mod:`.registry` (Table I as one table: which crafter, view and distinguisher each threat model
uses). This module re-exports them so that existing imports keep working.
"""

from __future__ import annotations

from dpaudit.experiments.instantiation.design.crafters.canary import (
    _projection_observer,
    clipped_gradient_mass,
    craft_malicious_dataset,
    inert_coordinates,
    place_canaries,
    play_gradient_canary,
    play_malicious_dataset,
    silence_features,
)
from dpaudit.experiments.instantiation.design.crafters.poison import (
    adaptive_poison_injector,
    craft_adaptive_input,
    craft_static_poison,
    play_adaptive_poison,
    play_static_poison,
    train_shadow_models,
)
from dpaudit.experiments.instantiation.design.crafters.record import play_api_access
from dpaudit.experiments.instantiation.design.distinguishers import (
    distinguisher1_scores,
    distinguisher2_statistics,
    distinguisher3,
)
from dpaudit.experiments.instantiation.design.game import (
    Game,
    _flat,
    _split_flat,
    per_trial_losses,
    point_loss_observer,
    test_accuracy,
)
from dpaudit.training.gradient_canary import smallest_update_coordinates

__all__ = [
    "Game",
    "_flat",
    "_projection_observer",
    "_split_flat",
    "adaptive_poison_injector",
    "clipped_gradient_mass",
    "craft_adaptive_input",
    "craft_malicious_dataset",
    "craft_static_poison",
    "distinguisher1_scores",
    "distinguisher2_statistics",
    "distinguisher3",
    "inert_coordinates",
    "per_trial_losses",
    "place_canaries",
    "play_adaptive_poison",
    "play_api_access",
    "play_gradient_canary",
    "play_malicious_dataset",
    "play_static_poison",
    "point_loss_observer",
    "silence_features",
    "smallest_update_coordinates",
    "test_accuracy",
    "train_shadow_models",
]
