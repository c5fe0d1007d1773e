"""Attack stage of the membership audit: per-model attack analysis.

For one model's member and non-member losses, :func:`analyse_model` runs Yeom et al.'s
loss-threshold attack (average training loss as threshold), turns its best-threshold advantage
into Erlingsson Prop. 3's ε (a naive *estimate*: the threshold is chosen on the data it scores),
computes the per-model test statistic ``epsilon_per_model_test`` (Clopper–Pearson on this model's
member / non-member split at a validly chosen threshold) and Epsilon* (Negoescu Def. 2, App. B's
band rule) with its null level at the same n (label permutations of the pooled losses), so that a
value no larger than what identical distributions give is flagged, and a bootstrap spread.

``epsilon_per_model_test`` is NOT a lower bound on the DP mechanism's ε: it tests whether this one
trained model tells its members from its non-members, with the records as the sample. The bound
on the mechanism is the one-run audit the bounds stage computes from the same scores (Steinke,
Nasr & Jagielski 2023). References: :data:`dpaudit.references.YEOM`,
:data:`dpaudit.references.ERLINGSSON`, :data:`dpaudit.references.NEGOESCU`,
:data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`.
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
    tpr_at_fpr: float  # empirical TPR at the fixed FPR (the bounds stage adds its interval)
    valid_advantage: float  # advantage of the validly selected threshold on the held-out half
    # Clopper–Pearson ε at that threshold on THIS model's members vs non-members: a test statistic
    # of one model's split, not a bound on the mechanism's ε (see the module docstring).
    epsilon_per_model_test: float
    epsilon_heldout_prop3: float  # Prop. 3 at the held-out advantage: a point estimate, not a bound
    naive_advantage: float  # best TPR − FPR over thresholds on the same data (optimistic)
    epsilon_naive_estimate: float  # Prop. 3 on the naive advantage: an estimate that overclaims
    epsilon_star_parametric: float  # Negoescu App. B (band rule), the point value
    epsilon_star_spread_low: float  # bootstrap percentile spread (not a confidence interval)
    epsilon_star_spread_high: float
    epsilon_star_null_mean: float  # mean Epsilon* over label permutations (identical distributions)
    epsilon_star_null_high: float  # 95th percentile of the permutation values
    epsilon_star_above_null: float  # 1: epsilon_star_parametric > epsilon_star_null_high
    epsilon_star_empirical: float
    ks_pvalue: float

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
    n_bootstrap: int = 50,
) -> ModelAttack:
    """All attack numbers of one model from its losses on members and non-members.

    The loss-threshold attacks use cross-entropy (Yeom et al.); Epsilon* uses the logit loss of
    Negoescu's footnote 1, on which their normal fit (App. B) is defined, via
    :func:`dpaudit.bounds.epsilon_star.epsilon_star_with_null` (its null level from 100 label
    permutations, ``n_bootstrap`` resamples for the bootstrap spread).
    """
    from dpaudit.bounds.empirical import epsilon_from_advantage, epsilon_lower_from_scores
    from dpaudit.bounds.epsilon_star import epsilon_star_empirical, epsilon_star_with_null

    yeom = loss_threshold_attack(member_ce, nonmember_ce)
    naive = best_threshold_advantage(member_ce, nonmember_ce)
    per_model = epsilon_lower_from_scores(
        membership_scores(member_ce),
        membership_scores(nonmember_ce),
        delta,
        confidence=confidence,
        method=selection,  # type: ignore[arg-type]
        seed=seed,
    )
    star = epsilon_star_with_null(
        member_logit,
        nonmember_logit,
        delta,
        method="parametric",
        spread_level=confidence,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
    star_emp = epsilon_star_empirical(member_logit, nonmember_logit, delta)
    return ModelAttack(
        yeom_threshold=yeom.threshold,
        yeom_tpr=yeom.tpr,
        yeom_fpr=yeom.fpr,
        yeom_advantage=yeom.advantage,
        yeom_epsilon=epsilon_from_advantage(max(yeom.advantage, 0.0), delta),
        tpr_at_fpr=tpr_at_fpr(member_ce, nonmember_ce, fpr),
        valid_advantage=float(per_model.advantage),
        epsilon_per_model_test=float(per_model.epsilon_lower),
        epsilon_heldout_prop3=epsilon_from_advantage(min(max(float(per_model.advantage), 0.0), 1.0), delta),
        naive_advantage=naive.advantage,
        epsilon_naive_estimate=epsilon_from_advantage(max(naive.advantage, 0.0), delta),
        epsilon_star_parametric=float(star.epsilon_star),
        epsilon_star_spread_low=float(star.spread_low),
        epsilon_star_spread_high=float(star.spread_high),
        epsilon_star_null_mean=float(star.null_mean),
        epsilon_star_null_high=float(star.null_high),
        epsilon_star_above_null=float(star.above_null),
        epsilon_star_empirical=float(star_emp.epsilon_star),
        ks_pvalue=float(star.ks_pvalue),
    )


def attack(config: MembershipConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Per model: Yeom attack, TPR at the fixed FPR, the per-model test, naive estimate, Epsilon*."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    delta = manifest.delta
    seed = int(manifest.seeds["seed"])
    with np.load(audit.losses_path, allow_pickle=False) as f:
        losses = {k: f[k] for k in f.files}
    n_models = len(losses["model_strategy"])
    masks = losses["member_mask"].astype(bool)
    rows: list[ModelAttack] = []
    for m in progress(range(n_models), desc=f"attack {audit.name}", unit="model"):
        rows.append(
            analyse_model(
                losses["ce"][m][masks[m]],
                losses["ce"][m][~masks[m]],
                losses["logit"][m][masks[m]],
                losses["logit"][m][~masks[m]],
                delta,
                fpr=config.attack.fpr,
                confidence=config.attack.confidence,
                selection=config.attack.selection,
                seed=seed * 100_003 + m,
                n_bootstrap=config.attack.epsilon_star_bootstrap,
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
