"""Attack stage of the canaries experiment: LiRA and the label-only attack, every canary × target.

Each of the M models is in turn the target and the other M − 1 its shadows (leave-one-out), so each
attack gives one score per (canary k, target m): K·M decisions, half of them "in" (Aerni et al. §3,
:data:`dpaudit.references.AERNI`).

- LiRA (Carlini et al. 2022, "Membership inference attacks from first principles", arXiv
  2112.03570, Algorithm 1) through :func:`dpaudit.attacks.lira.lira_scores`: online (in- and
  out-Gaussians) and offline (out only), on the logit-scaled confidence and on the hinge, with
  per-sample or global variance, averaged over query augmentations when ``attack.augment``.
  It runs on every defence that releases logits.
- The label-only attack (:func:`label_only_scores`) for a release of the top-1 label only: the same
  likelihood-ratio test with a Bernoulli model of "the target predicts the canary's assigned label".
  On clean records it is the defence's own population-style attack; on mislabeled canaries it is
  Aerni et al.'s adaptive attack (the defence hides confidences, but a memorised wrong label shows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.attacks.lira import lira_scores
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.canaries.config import CanariesConfig
from dpaudit.experiments.canaries.design import ATTACK_FILE, DEFENCE_KINDS, DESIGN_FILE, load_audit_set
from dpaudit.io import write_npz
from dpaudit.layout import Audit

LIRA_ATTACKS = ("lira_online_logit", "lira_online_hinge", "lira_offline_logit", "lira_offline_hinge")
LABEL_ONLY = "label_only"

#: Additive smoothing of the Bernoulli rates (Jeffreys prior: +1/2 success, +1/2 failure).
SMOOTHING = 0.5


def label_only_scores(hits: np.ndarray, membership: np.ndarray, smoothing: float = SMOOTHING) -> np.ndarray:
    """Label-only LiRA scores ``[K, M]`` from ``hits[k, m, a]`` = 1 if query a of canary k gets its label.

    Leave-one-out like :func:`dpaudit.attacks.lira.lira_scores`: for target m, the rates p_in and
    p_out of a hit are estimated on the other models where canary k is in / out (smoothed), and the
    score is ``mean_a log Pr(hit_kma | p_in) − log Pr(hit_kma | p_out)``; higher means "member".
    """
    b = np.asarray(hits, dtype=np.float64)
    if b.ndim == 2:
        b = b[..., None]
    member = np.asarray(membership, dtype=bool)[..., None].astype(np.float64)  # [K, M, 1]
    out = 1.0 - member

    def rate(side: np.ndarray) -> np.ndarray:
        total = (side * b).sum(axis=1, keepdims=True)  # [K, 1, A]
        count = side.sum(axis=1, keepdims=True)  # [K, 1, 1]
        loo_total = total - side * b
        loo_count = count - side
        return (loo_total + smoothing) / (loo_count + 2.0 * smoothing)

    p_in, p_out = rate(member), rate(out)
    llr = b * (np.log(p_in) - np.log(p_out)) + (1.0 - b) * (np.log1p(-p_in) - np.log1p(-p_out))
    return llr.mean(axis=-1)


def attack(config: CanariesConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Scores ``[K, M]`` of every (defence, attack) pair; the design's membership and types."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    audit_set = load_audit_set(audit.train_dir / DESIGN_FILE)
    membership = audit_set.membership
    with np.load(audit.losses_path, allow_pickle=False) as f:
        views = {key: f[key] for key in f.files}
    queries = slice(None) if config.attack.augment else slice(0, 1)
    arrays: dict[str, np.ndarray] = {}
    for defence in manifest.facts["defences"]:
        name, group = str(defence["name"]), str(defence["weights"])
        if not DEFENCE_KINDS[str(defence["kind"])].label_only:
            for attack_name in LIRA_ATTACKS:
                _, mode, confidence = attack_name.split("_")
                phi = views[f"{group}__phi_{confidence}"][:, :, queries]
                arrays[f"{name}__{attack_name}"] = lira_scores(
                    phi,
                    membership,
                    mode=mode,
                    variance=config.attack.variance,  # type: ignore[arg-type]
                )
        hits = views[f"{group}__pred"][:, :, queries] == audit_set.canary_y[:, None, None]
        arrays[f"{name}__{LABEL_ONLY}"] = label_only_scores(hits, membership)
    arrays["membership"] = membership
    arrays["canary_type"] = audit_set.canary_type
    arrays["copies"] = audit_set.copies
    arrays["main_confidence"] = np.asarray(config.attack.confidence)
    arrays["variance"] = np.asarray(config.attack.variance)
    arrays["augment"] = np.asarray(config.attack.augment)
    write_npz(out_dir / ATTACK_FILE, arrays)
