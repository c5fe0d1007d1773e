"""Attack stage of the canaries experiment: LiRA, RMIA and the label-only attack, every canary × target.

Each of the M models is in turn the target and the other M − 1 its shadows (leave-one-out), so each
attack gives one score per (canary k, target m): K·M decisions, half of them "in" (Aerni et al. §3,
:data:`dpaudit.references.AERNI`).

- LiRA (Carlini et al. 2022, "Membership inference attacks from first principles", arXiv
  2112.03570, Algorithm 1) through :func:`dpaudit.attacks.lira.lira_scores`: online (in- and
  out-Gaussians) and offline (out only), on the logit-scaled confidence and on the hinge, with
  per-sample or global variance, averaged over query augmentations when ``attack.augment``.
  It runs on every defence that releases logits.
- The label-only attack (:func:`dpaudit.attacks.label_only.label_only_scores`) for a release of the
  top-1 label only: the same likelihood-ratio test with a Bernoulli model of "the target predicts
  the canary's assigned label", on equally many in- and out-shadows (unbiased with no signal).
  On clean records it is the defence's own population-style attack; on mislabeled canaries it is
  Aerni et al.'s adaptive attack (the defence hides confidences, but a memorised wrong label shows).
- On the non-private releases (undefended, the published heuristics): RMIA (Zarifzadeh et al. 2024,
  :mod:`dpaudit.attacks.rmia`) with 1 reference model offline and 4 online (ties of its count split
  by LR(x): ``refine_ties``, this project's choice, not the paper's), LiRA fitted on exactly the same
  reference models (one fixed σ per augmentation), and ``threshold_confidence``, the
  population-level attack the heuristics were published with (one global threshold on φ).

Every (defence, attack, canary type) is one score set of K_t·M decisions (group ``defence`` /
``attack`` / ``canary_type``; arrays ``canary`` and ``model``), audited for attack strength
(estimator ``rates``). The defence's own attack on the single-record canary types (or on clean
records where there are none) also names ``lira_per_model`` (ε lower bounds from one decision per
model) and ``lira_pooled`` (an estimate from all decisions), RMIA's sets ``lira_per_model`` too (its
bounds share the defence's joint level); a DP-SGD defence's sets declare the
Poisson-subsampled Gaussian of its run (``assumes``, with q and T).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.attacks.label_only import label_only_scores
from dpaudit.attacks.lira import lira_scores, lira_scores_with_references
from dpaudit.attacks.rmia import reference_models, rmia_scores
from dpaudit.experiments.base import TrainManifest, event_to_json
from dpaudit.experiments.canaries.config import CANARY_TYPES, CanariesConfig
from dpaudit.experiments.canaries.design import (
    DEFENCE_KINDS,
    DESIGN_FILE,
    LABEL_ONLY,
    REFERENCE_ATTACKS,
    THRESHOLD_ATTACK,
    load_audit_set,
)
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.scores import ScoreSet, write_score_sets

LIRA_ATTACKS = ("lira_online_logit", "lira_online_hinge", "lira_offline_logit", "lira_offline_hinge")
def reference_attack_scores(
    phi: np.ndarray, membership: np.ndarray, population_prob: np.ndarray
) -> dict[str, np.ndarray]:
    """RMIA (:func:`dpaudit.attacks.rmia.rmia_scores`) and LiRA fitted on exactly its reference models,
    for each of :data:`REFERENCE_ATTACKS`. ``phi``: logit-scaled confidences ``[K, M, A]``, whose
    logistic is the probability of the canary's label; ``population_prob``: ``[M, Z]``."""
    prob = 1.0 / (1.0 + np.exp(-np.asarray(phi, dtype=np.float64)))
    out = {}
    for mode, r in REFERENCE_ATTACKS:
        refs = reference_models(membership, r, mode)
        out[f"rmia_{mode}_r{r}"] = rmia_scores(
            prob, population_prob, membership, references=r, mode=mode, refine_ties=True
        )
        out[f"lira_{mode}_r{r}"] = lira_scores_with_references(phi, membership, refs, mode=mode)
    return out


def main_attack(kind: str, confidence: str) -> str:
    """The defence's own attack: label-only where the defence releases only labels (the heuristic),
    online LiRA on ``confidence`` otherwise."""
    return LABEL_ONLY if DEFENCE_KINDS[kind].label_only else f"lira_online_{confidence}"


def bound_types(canary_type: np.ndarray) -> list[int]:
    """The canary types ε is bounded on: the single-record non-clean types present (repeated canaries
    differ by r records: their ε is a group-privacy ε), else clean."""
    clean = CANARY_TYPES.index("clean")
    present = [t for t in range(len(CANARY_TYPES)) if np.any(canary_type == t)]
    single = [t for t in present if t != clean and not CANARY_TYPES[t].endswith("duplicates")]
    return single or [clean]


def defence_sets(
    defence: dict, scores: dict[str, np.ndarray], membership: np.ndarray, canary_type: np.ndarray,
    own: str, manifest: TrainManifest,
) -> list[ScoreSet]:  # fmt: skip
    """The score sets of one defence: every attack × canary type (see the module docstring)."""
    name, kind = str(defence["name"]), str(defence["kind"])
    private = DEFENCE_KINDS[kind].private
    mechanism = manifest.mechanisms.get(name)
    params = {"delta": float(manifest.delta)}
    if private:
        params |= {
            "sampling_rate": float(manifest.facts["sampling_rate"]),
            "steps": int(manifest.facts["steps"]),
        }
    bounded = bound_types(canary_type)
    sets = []
    for attack_name, attack_scores in scores.items():
        for t in range(len(CANARY_TYPES)):
            rows = np.flatnonzero(canary_type == t)
            if rows.size == 0:
                continue
            k, m = np.meshgrid(np.arange(rows.size), np.arange(membership.shape[1]), indexing="ij")
            estimators = ("rates",)
            if attack_name == own and t in bounded:
                estimators += ("lira_per_model", "lira_pooled")
            elif attack_name.startswith("rmia_") and t in bounded:
                estimators += ("lira_per_model",)
            sets.append(
                ScoreSet(
                    {"defence": name, "attack": attack_name, "canary_type": CANARY_TYPES[t]},
                    attack_scores[rows].ravel(),
                    membership[rows].ravel(),
                    estimators,
                    "subsampled-gaussian" if private else "none",
                    event_to_json(mechanism.dp_event()) if private and mechanism is not None else None,
                    params,
                    {"canary": k.ravel(), "model": m.ravel()},
                )
            )
    return sets


def attack(config: CanariesConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Every defence's score sets, written to ``audit.scores_path`` (in ``out_dir``, the attack dir)."""
    audit_set = load_audit_set(audit.train_dir / DESIGN_FILE)
    membership = audit_set.membership.astype(bool)
    with open_npz(audit.losses_path) as f:
        views = {key: f[key] for key in f.files}
    queries = slice(None) if config.attack.augment else slice(0, 1)
    sets: list[ScoreSet] = []
    for defence in manifest.facts["defences"]:
        kind, group = str(defence["kind"]), str(defence["weights"])
        scores: dict[str, np.ndarray] = {}
        if not DEFENCE_KINDS[kind].label_only:
            for attack_name in LIRA_ATTACKS:
                _, mode, confidence = attack_name.split("_")
                phi = views[f"{group}__phi_{confidence}"][:, :, queries]
                scores[attack_name] = lira_scores(
                    phi, membership, mode=mode, variance=config.attack.variance,  # type: ignore[arg-type]
                )  # fmt: skip
            if not DEFENCE_KINDS[kind].private:  # the non-private releases: the heuristics and their baseline
                phi = views[f"{group}__phi_logit"][:, :, queries]
                scores[THRESHOLD_ATTACK] = phi[:, :, 0].astype(np.float64)
                scores |= reference_attack_scores(phi, membership, views[f"{group}__population_prob"])
        hits = views[f"{group}__pred"][:, :, queries] == audit_set.canary_y[:, None, None]
        scores[LABEL_ONLY] = label_only_scores(hits, membership)
        own = main_attack(kind, config.attack.confidence)
        sets.extend(defence_sets(defence, scores, membership, audit_set.canary_type, own, manifest))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_score_sets(out_dir / audit.scores_path.name, sets)
