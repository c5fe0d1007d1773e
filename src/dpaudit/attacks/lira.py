"""LiRA, the likelihood-ratio membership attack, on a canaries × models grid.

Carlini et al. (2022), "Membership Inference Attacks From First Principles" (IEEE S&P), Algorithm 1,
as used for sample-level evaluation by Aerni et al. (2024), "Evaluations of Machine Learning
Privacy Defenses are Misleading", "efficient sample-level evaluations using canaries"
(`../shared/papers/aerni-misleading-privacy-evaluations.txt`,
`../shared/specs/canaries.md`).

Protocol. There are K canaries and M models; ``membership[k, m]`` says whether canary k was in the
training set of model m. Every model in turn is the *target* and the other M − 1 models are its
*shadows* (leave-one-out), which gives K·M decisions. For each decision (k, m) the attack

1. turns the target's logits on canary k into a confidence φ_km (Carlini et al.'s
   logit scaling of the model confidence):
   the logit-scaled confidence φ = log(p_y / (1 − p_y)) = z_y − logsumexp_{j≠y} z_j
   (:func:`dpaudit.training.outputs.logit_scaled_confidence`) or the hinge z_y − max_{j≠y} z_j
   (:func:`dpaudit.training.outputs.hinge_confidence`), computed by the losses stage;
2. fits Gaussians to the shadows' confidences on the same canary: N(μ_in, σ_in²) over the shadows
   m′ ≠ m that trained on k and N(μ_out, σ_out²) over those that did not (the parametric fits of
   Algorithm 1);
3. scores the decision (higher = member):

   - **online** (Algorithm 1): the log-likelihood ratio
     ``s = log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²)``;
   - **offline** (Carlini et al.'s offline variant, Λ = 1 − Pr[Z > φ], Z ~ N(μ_out, σ_out²)): the
     one-sided test that φ is larger than the out-distribution predicts. We return the monotone transform
     ``s = −log Pr[Z > φ] = −log S((φ − μ_out)/σ_out)`` (``S`` the standard normal survival
     function, via :func:`scipy.stats.norm.logsf`), which orders decisions exactly like 1 − Pr[Z > φ]
     and keeps its resolution deep in the upper tail, where low-FPR thresholds sit. (The authors'
     released code scores offline with the two-sided −log N(φ; μ_out, σ_out²); the paper's one-sided
     form is the one that calls high confidence "member", and the one implemented here.)

   With A query augmentations (confidences ``[K, M, A]``) each augmentation a gets its own fit
   (μ_{·,a}, σ_{·,a}) and the score is the mean over augmentations of the per-augmentation score
   (Carlini et al. fit a Gaussian per augmentation; their released code averages the
   per-augmentation log-likelihood ratios, i.e. a diagonal multivariate Gaussian up to the factor
   1/A, which does not change the ranking).

Estimators. μ is the sample mean (the released code uses the median; the mean is what admits exact
leave-one-out from sufficient statistics) and σ² the unbiased sample variance (ddof = 1):

- ``variance="per_sample"``: σ_in², σ_out² per canary (and augmentation), Carlini et al.'s default;
- ``variance="global"``: one pooled within-canary variance per side (and augmentation),
  σ² = Σ_k SS_k / Σ_k (n_k − 1), used by Carlini et al. when few shadows are available
  (their "fixed variance" option). Pooling the within-canary sums of squares, rather than taking
  the variance of all values, keeps the between-canary spread of μ out of σ.

Leave-one-out is exact and costs O(K·M·A): the per-canary sums and centred sums of squares over
all models are computed once, and the target's own contribution is removed with the downdate
``n′ = n − 1``, ``μ′ = (n μ − x)/(n − 1)``, ``SS′ = SS − n (x − μ)²/(n − 1)`` (Welford/Chan et al.),
which is numerically stable, unlike ``Σx² − n μ²``. Nothing is refitted per target.

Why hand-written: no maintained library ships LiRA (TensorFlow Privacy's membership-inference
module has threshold and trained-classifier attacks only; the authors' reference code is a research
script over files on disk). Log-densities and survival functions come from :mod:`scipy.stats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import norm

Mode = Literal["online", "offline"]
Variance = Literal["per_sample", "global"]

#: Smallest number of shadows on each side of a canary's fit (two are needed for a variance).
MIN_SHADOWS = 2

#: Default floor on fitted standard deviations, so a canary whose shadows agree exactly still gets
#: a finite score (Carlini et al.'s released code adds 1e-30 for the same reason).
DEFAULT_MIN_STD = 1e-6


@dataclass(frozen=True)
class GaussianFits:
    """Leave-one-out Gaussian fits for every decision (canary k, target m, augmentation a).

    Each array is ``[K, M, A]``: the fit for decision (k, m) uses only the shadows m′ ≠ m.
    ``mu_in``/``std_in`` are ``None`` for offline fits, which only need the out side.
    """

    mu_out: np.ndarray
    std_out: np.ndarray
    mu_in: np.ndarray | None = None
    std_in: np.ndarray | None = None


def _as_grid(confidences: np.ndarray, membership: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    phi = np.asarray(confidences, dtype=np.float64)
    if phi.ndim == 2:
        phi = phi[..., None]
    if phi.ndim != 3:
        raise ValueError(f"confidences must be [K, M] or [K, M, A], got shape {phi.shape}")
    if not np.all(np.isfinite(phi)):
        raise ValueError("confidences contain NaN or infinite values")
    member = np.asarray(membership)
    if member.dtype != np.bool_:
        raise ValueError(f"membership must be a boolean [K, M] array, got dtype {member.dtype}")
    if member.shape != phi.shape[:2]:
        raise ValueError(f"membership has shape {member.shape}, confidences are {phi.shape[:2]} (K, M)")
    return phi, member


def _check_counts(count: np.ndarray, side: str) -> None:
    """Every decision must have at least MIN_SHADOWS shadows on this side after leave-one-out."""
    # The fewest shadows on a side occur when the target itself is on that side: count − 1.
    loo_min = np.where(count > 0, count - 1, 0)
    bad = np.flatnonzero(loo_min < MIN_SHADOWS)
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"LiRA needs >= {MIN_SHADOWS} {side}-shadows for every (canary, target) pair; canary {k} is "
            f"{side} in {int(count[k])} of the models, which leaves {int(loo_min[k])} {side}-shadows when "
            f"the target is one of them ({bad.size} canaries affected; each canary must be {side} in "
            f">= {MIN_SHADOWS + 1} models)"
        )


def _loo_side(
    phi: np.ndarray, on_side: np.ndarray, variance: Variance, min_std: float
) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out mean and std on one side (in or out), ``[K, M, A]`` each, in O(K·M·A)."""
    weight = on_side[..., None].astype(np.float64)  # [K, M, 1]
    n = weight.sum(axis=1, keepdims=True)  # [K, 1, 1]
    mean = (weight * phi).sum(axis=1, keepdims=True) / n  # [K, 1, A]
    ss = (weight * (phi - mean) ** 2).sum(axis=1, keepdims=True)  # [K, 1, A] centred
    # Remove the target's own value where it is on this side (Welford downdate).
    own = weight  # 1 where the target contributes to this side's statistics
    n_loo = n - own  # [K, M, 1]
    delta = phi - mean
    mean_loo = mean - own * delta / n_loo
    ss_loo = ss - own * (n / n_loo) * delta**2
    ss_loo = np.maximum(ss_loo, 0.0)
    if variance == "per_sample":
        var = ss_loo / (n_loo - 1.0)
    else:
        # Pooled within-canary variance: every canary's SS over every canary's dof, with the target
        # decision's canary replaced by its leave-one-out SS and dof.
        ss_total = ss.sum(axis=0, keepdims=True)  # [1, 1, A]
        dof_total = (n - 1.0).sum(axis=0, keepdims=True)  # [1, 1, 1]
        var = (ss_total - ss + ss_loo) / (dof_total - own)
    std = np.maximum(np.sqrt(var), min_std)
    return mean_loo, std


def leave_one_out_fits(
    confidences: np.ndarray,
    membership: np.ndarray,
    *,
    mode: Mode = "online",
    variance: Variance = "per_sample",
    min_std: float = DEFAULT_MIN_STD,
) -> GaussianFits:
    """The Gaussian fits of :func:`lira_scores` for every (canary, target, augmentation).

    Decision (k, m) is fitted on the shadows m′ ≠ m only (exact leave-one-out by sufficient-statistic
    downdates, see the module docstring). Raises ``ValueError`` when a canary has fewer than
    :data:`MIN_SHADOWS` in- or out-shadows for some target (offline checks the out side only).
    """
    if mode not in ("online", "offline"):
        raise ValueError(f"mode must be 'online' or 'offline', got {mode!r}")
    if variance not in ("per_sample", "global"):
        raise ValueError(f"variance must be 'per_sample' or 'global', got {variance!r}")
    if not min_std > 0:
        raise ValueError(f"min_std must be > 0, got {min_std}")
    phi, member = _as_grid(confidences, membership)
    n_in = member.sum(axis=1)
    n_out = member.shape[1] - n_in
    _check_counts(n_out, "out")
    mu_out, std_out = _loo_side(phi, ~member, variance, min_std)
    if mode == "offline":
        return GaussianFits(mu_out=mu_out, std_out=std_out)
    _check_counts(n_in, "in")
    mu_in, std_in = _loo_side(phi, member, variance, min_std)
    return GaussianFits(mu_out=mu_out, std_out=std_out, mu_in=mu_in, std_in=std_in)


def lira_scores(
    confidences: np.ndarray,
    membership: np.ndarray,
    *,
    mode: Mode = "online",
    variance: Variance = "per_sample",
    min_std: float = DEFAULT_MIN_STD,
) -> np.ndarray:
    """LiRA scores ``[K, M]`` for every (canary k, target model m); higher means "member".

    ``confidences`` is ``[K, M]`` or ``[K, M, A]`` (A query augmentations) of per-model confidences,
    e.g. :func:`dpaudit.training.outputs.logit_scaled_confidence`; ``membership`` is the boolean
    ``[K, M]`` design. Online:
    ``mean_a [log N(φ_kma; μ_in, σ_in²) − log N(φ_kma; μ_out, σ_out²)]`` (Carlini et al. 2022,
    Algorithm 1). Offline: ``mean_a [−log Pr(Z > φ_kma)]``, Z ~ N(μ_out, σ_out²) (one-sided).
    Fits are leave-one-out over the other models (:func:`leave_one_out_fits`); σ is floored at
    ``min_std``. The scores of in-decisions (``membership``) and out-decisions go to the scores
    auditor as they are.
    """
    phi, _ = _as_grid(confidences, membership)
    fits = leave_one_out_fits(confidences, membership, mode=mode, variance=variance, min_std=min_std)
    if mode == "offline":
        per_aug = -norm.logsf(phi, loc=fits.mu_out, scale=fits.std_out)
    else:
        assert fits.mu_in is not None and fits.std_in is not None
        per_aug = norm.logpdf(phi, loc=fits.mu_in, scale=fits.std_in) - norm.logpdf(
            phi, loc=fits.mu_out, scale=fits.std_out
        )
    return per_aug.mean(axis=-1)


def augmentation_scale(confidences: np.ndarray, min_std: float = DEFAULT_MIN_STD) -> np.ndarray:
    """One standard deviation per query augmentation, ``[A]``: the pooled within-canary standard
    deviation of every model's confidence, σ_a² = Σ_k Σ_m (φ_kma − φ̄_ka)² / (K (M − 1)), floored at
    ``min_std``. It reads no membership bit (both sides pooled around the canary's mean), so it cannot
    carry a target's own bit into its score; :func:`lira_scores_with_references` scales by it."""
    phi = np.asarray(confidences, dtype=np.float64)
    if phi.ndim == 2:
        phi = phi[..., None]
    centred = phi - phi.mean(axis=1, keepdims=True)
    var = (centred**2).sum(axis=(0, 1)) / (phi.shape[0] * (phi.shape[1] - 1))
    return np.maximum(np.sqrt(var), min_std)


def lira_scores_with_references(
    confidences: np.ndarray, membership: np.ndarray, references: np.ndarray, *, mode: Mode = "online"
) -> np.ndarray:
    """LiRA scores ``[K, M]`` fitted on chosen reference models only (``references[k, m]``: the model
    indices of decision (k, m), e.g. :func:`dpaudit.attacks.rmia.reference_models`), so LiRA and
    RMIA can be compared on the same few models.

    μ_in and μ_out are the means over the references that did / did not train on canary k. With one
    or two references per side no per-canary variance exists, so Carlini et al.'s fixed-variance
    option applies: one σ_a per augmentation a for every decision and both sides
    (:func:`augmentation_scale`; it reads every model's confidences but no membership bit). Each
    augmentation is scored like :func:`lira_scores` scores it and the scores are averaged over the A
    augmentations, as Carlini et al.'s released code does:

    - online: the log-likelihood ratio ``((φ_a − μ_out,a)² − (φ_a − μ_in,a)²) / (2 σ_a²)``;
    - offline: the one-sided ``−log Pr(Z_a > φ_a)``, Z_a ~ N(μ_out,a, σ_a²).

    Without augmentations (A = 1) σ is one number, so the ranking, and every rate or bound computed
    from it, is that of ``(φ − μ_out)² − (φ − μ_in)²`` (online) and ``φ − μ_out`` (offline). With
    A > 1 the per-augmentation scores are averaged, not the confidences: averaging φ − μ_out over the
    augmentations (an earlier version) ranks like a test on the mean confidence, not like the mean of
    the per-augmentation scores :func:`lira_scores` averages.
    """
    phi, member = _as_grid(confidences, membership)
    refs = np.asarray(references)
    if refs.ndim != 3 or refs.shape[:2] != member.shape:
        raise ValueError(f"references must be [K, M, r] for membership {member.shape}, got {refs.shape}")
    if mode not in ("online", "offline"):
        raise ValueError(f"mode must be 'online' or 'offline', got {mode!r}")
    rows = np.arange(phi.shape[0])[:, None, None]
    ref_phi = phi[rows, refs]  # [K, M, r, A]
    ref_in = member[rows, refs][..., None].astype(np.float64)  # [K, M, r, 1]
    sigma = augmentation_scale(phi)  # [A]

    def side_mean(weight: np.ndarray, side: str) -> np.ndarray:
        count = weight.sum(axis=2)
        if np.any(count == 0):
            raise ValueError(f"every decision needs >= 1 {side}-reference; some have none")
        return (weight * ref_phi).sum(axis=2) / count

    mu_out = side_mean(1.0 - ref_in, "out")
    if mode == "offline":
        return (-norm.logsf((phi - mu_out) / sigma)).mean(axis=-1)
    mu_in = side_mean(ref_in, "in")
    return (((phi - mu_out) ** 2 - (phi - mu_in) ** 2) / (2.0 * sigma**2)).mean(axis=-1)
