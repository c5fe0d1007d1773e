"""Crafter 1 (Nasr et al. 2021 §IV-A, :data:`dpaudit.references.NASR_2021`): a population record,
fresh per trial (or fixed), D′ = D ∪ {(x, y)}; threat model A's view is the final model's loss on it.
"""

from __future__ import annotations

import numpy as np

from dpaudit.experiments.instantiation.design.game import Game, per_trial_losses, test_accuracy
from dpaudit.training.dpsgd import train_trials

__all__ = ["play_api_access"]


def play_api_access(
    game: Game, z: float, inserted: np.ndarray, seed: int, *, fresh: bool = True
) -> dict[str, np.ndarray]:
    """Threat model A (§IV-A): Crafter 1 and the final model's loss on the record (Distinguisher 1)."""
    T = len(inserted)
    rng = np.random.default_rng([seed, 1])
    count = T if fresh else 1
    picks = rng.choice(len(game.X_pool), size=count, replace=count > len(game.X_pool))
    record_of_trial = np.arange(T) if fresh else np.zeros(T, dtype=np.int64)
    X = np.concatenate([game.X_d, game.X_pool[picks]])
    y = np.concatenate([game.y_d, game.y_pool[picks]])
    n = len(game.X_d)
    mask = np.zeros((T, len(X)), dtype=bool)
    mask[:, :n] = True
    mask[np.arange(T), n + record_of_trial] = inserted.astype(bool)
    result = train_trials(
        game.model, X, y, mask, game.config(z), seed=seed, chunk_size=game.chunk_size, desc="A: API access"
    )
    xt = game.X_pool[picks][record_of_trial][:, None]
    yt = game.y_pool[picks][record_of_trial][:, None]
    loss = per_trial_losses(game.model, result.params, xt, yt)[:, 0]
    return {
        "inserted": inserted,
        "final_loss": loss,
        "test_accuracy": test_accuracy(game.model, result.params, game.X_eval, game.y_eval),
    }
