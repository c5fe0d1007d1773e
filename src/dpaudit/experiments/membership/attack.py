"""Attack stage of the membership audit: per-model attack analysis.

For one model's member and non-member losses, :func:`analyse_model` runs Yeom et al.'s
loss-threshold attack (average training loss as threshold), reads the TPR at a fixed FPR
(Erlingsson §4), turns the best-threshold advantage into an ε lower bound (Erlingsson Prop. 3) —
once with the bounds library's valid threshold selection and once as the naive same-data maximum —
and computes Epsilon* (Negoescu Def. 2) parametrically and empirically with the KS p-value of the
normal fit (Negoescu App. B, §8.2).
References: :data:`dpaudit.references.YEOM`, :data:`dpaudit.references.ERLINGSSON`,
:data:`dpaudit.references.NEGOESCU`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from dpaudit.attacks.membership import (
    best_threshold_advantage,
    loss_threshold_attack,
    membership_scores,
    tpr_at_fpr,
)
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.membership.config import MembershipConfig
from dpaudit.experiments.membership.design import ATTACK_FILE
from dpaudit.io import write_npz
from dpaudit.layout import Audit
from dpaudit.logs import progress


@dataclass(frozen=True)
class ModelAttack:
    """Every attack number for one model instance (all at the audit's δ)."""

    yeom_threshold: float
    yeom_tpr: float
    yeom_fpr: float
    yeom_advantage: float
    yeom_epsilon: float  # Prop. 3 at the average-loss threshold's advantage (point estimate)
    tpr_at_fpr: float
    valid_advantage: float  # advantage of the validly selected threshold on the held-out half
    epsilon_lower_valid: float  # Clopper–Pearson ε lower bound at that threshold (valid)
    epsilon_heldout_prop3: float  # Prop. 3 at the held-out advantage: a point estimate, not a bound
    naive_advantage: float  # best TPR − FPR over thresholds on the same data (optimistic)
    epsilon_lower_naive: float  # Prop. 3 on the naive advantage: NOT a valid bound
    epsilon_star_parametric: float
    epsilon_star_empirical: float
    ks_pvalue: float
    epsilon_star_control: float  # parametric Epsilon* between two random halves of the non-members

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def analyse_model(
    member_ce: np.ndarray,
    nonmember_ce: np.ndarray,
    member_logit: np.ndarray,
    nonmember_logit: np.ndarray,
    delta: float,
    fpr: float = 0.05,
    confidence: float = 0.95,
    selection: str = "split",
    seed: int = 0,
) -> ModelAttack:
    """All attack numbers of one model from its losses on members and non-members.

    The loss-threshold attacks use cross-entropy (Yeom et al.); Epsilon* uses the logit loss of
    Negoescu's footnote 1, on which their normal fit (App. B) is defined. As a control, Epsilon*
    is also computed between two random halves of the non-members: both come from one
    distribution, so its value is the estimator's finite-sample floor for this model.
    """
    from dpaudit.bounds.empirical import epsilon_from_advantage, epsilon_lower_from_scores
    from dpaudit.bounds.epsilon_star import epsilon_star_empirical, epsilon_star_parametric

    yeom = loss_threshold_attack(member_ce, nonmember_ce)
    naive = best_threshold_advantage(member_ce, nonmember_ce)
    valid = epsilon_lower_from_scores(
        membership_scores(member_ce),
        membership_scores(nonmember_ce),
        delta,
        confidence=confidence,
        method=selection,  # type: ignore[arg-type]
        seed=seed,
    )
    star_param = epsilon_star_parametric(member_logit, nonmember_logit, delta)
    star_emp = epsilon_star_empirical(member_logit, nonmember_logit, delta)
    shuffled = np.random.default_rng(seed).permutation(np.asarray(nonmember_logit, dtype=np.float64))
    half = shuffled.size // 2
    control = epsilon_star_parametric(shuffled[:half], shuffled[half:], delta)
    return ModelAttack(
        yeom_threshold=yeom.threshold,
        yeom_tpr=yeom.tpr,
        yeom_fpr=yeom.fpr,
        yeom_advantage=yeom.advantage,
        yeom_epsilon=epsilon_from_advantage(max(yeom.advantage, 0.0), delta),
        tpr_at_fpr=tpr_at_fpr(member_ce, nonmember_ce, fpr),
        valid_advantage=float(valid.advantage),
        epsilon_lower_valid=float(valid.epsilon_lower),
        epsilon_heldout_prop3=epsilon_from_advantage(min(max(float(valid.advantage), 0.0), 1.0), delta),
        naive_advantage=naive.advantage,
        epsilon_lower_naive=epsilon_from_advantage(max(naive.advantage, 0.0), delta),
        epsilon_star_parametric=float(star_param.epsilon_star),
        epsilon_star_empirical=float(star_emp.epsilon_star),
        ks_pvalue=float(star_param.ks_pvalue),
        epsilon_star_control=float(control.epsilon_star),
    )


def attack(config: MembershipConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Per model: Yeom attack, TPR at the fixed FPR, valid and naive ε lower bounds, Epsilon*."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    delta = manifest.delta
    seed = int(manifest.seeds["seed"])
    with np.load(audit.losses_path, allow_pickle=False) as f:
        losses = {k: f[k] for k in f.files}
    n_models = len(losses["model_strategy"])
    rows: list[ModelAttack] = []
    for m in progress(range(n_models), desc=f"attack {audit.name}", unit="model"):
        rows.append(
            analyse_model(
                losses["member_ce"][m],
                losses["nonmember_ce"][m],
                losses["member_logit"][m],
                losses["nonmember_logit"][m],
                delta,
                fpr=config.attack.fpr,
                confidence=config.attack.confidence,
                selection=config.attack.selection,
                seed=seed * 100_003 + m,
            )
        )
    arrays: dict[str, np.ndarray] = {
        name: np.asarray([getattr(row, name) for row in rows], dtype=np.float64)
        for name in ModelAttack.__dataclass_fields__
    }
    arrays.update(
        strategy_names=losses["strategy_names"],
        model_strategy=losses["model_strategy"],
        model_repeat=losses["model_repeat"],
        delta=np.asarray(delta),
        fpr=np.asarray(config.attack.fpr),
        confidence=np.asarray(config.attack.confidence),
        selection=np.asarray(config.attack.selection),
    )
    write_npz(out_dir / ATTACK_FILE, arrays)
