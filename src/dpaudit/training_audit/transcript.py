"""What an audit observed at every step of one training run, and the canaries' scores from it.

Notation (one step t; G_t is what the audit observes: the privatized gradient the optimizer received,
or minus the iterate's change when the code never called ``apply_gradients``):

* S: the *canary coordinates*, parameters that real records never move (first-layer weights of input
  features that are zero in every real record); P: the *probe coordinates*, k more such weights that
  no canary moves either. Under the declared DP-SGD, G_t restricted to P is pure noise
  N(0, (σC/n_t)² I_k), and G_t restricted to S is (K_t + N(0, σ²C² I)) / n_t, where
  K_t = Σ_{canaries j in the batch} clip_C(g_{t,j})[S] and n_t is the code's divisor.
* ŝ_t = ‖G_t[P]‖ / √k estimates the noise scale σC/n_t from the probe, so every statistic below is
  free of n_t, the learning rate and the loss' reduction.
* For canary j: d_{t,j} = g_{t,j}[S] / ‖g_{t,j}[S]‖ (its gradient at the current iterate θ_t, on S),
  c_{t,j} = ‖g_{t,j}[S]‖ · min(1, C / ‖g_{t,j}‖) (what its correctly clipped gradient adds along d).

The observer (:mod:`dpaudit.training_audit.observer`) fills a :class:`Transcript`; the conformance checks
(:mod:`dpaudit.training_audit.conformance`) and the ε lower bound (:func:`transcript_scores`) read it.
Everything the *scores* use is a function of the released iterates and the canaries, so any score
is covered by DP-SGD's guarantee for the whole sequence of iterates (Nasr et al. 2021, threat
models with intermediate models); ``present`` is the audit's own knowledge of which canaries joined
which step and is used only by the conformance checks, never by a score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SOURCES", "Transcript", "transcript_scores"]

SOURCES = ("gradients", "iterates")


@dataclass(frozen=True)
class Transcript:
    """One run, T steps, m canaries, k probe coordinates (arrays have a leading step axis).

    * ``projections`` [T, m]: y_{t,j} = ⟨G_t[S], d_{t,j}⟩ / ŝ_t, for every canary, present or not.
    * ``expected`` [T, m]: μ_{t,j} = c_{t,j} / (σC), the declared per-step signal of canary j if present.
    * ``present`` [T, m] bool: canary j was in step t's batch (audit knowledge; checks only).
    * ``signal`` [T]: b_t = ‖K_t‖ / (σC) with the declared σ, C (0 when no canary was in the batch).
    * ``signal_observed`` [T]: a_t = ⟨G_t[S], K_t / ‖K_t‖⟩ / ŝ_t (0 when b_t = 0). Under the declared
      DP-SGD a_t = (b_t + Z_t) / √(χ²_k,t / k) with Z_t ~ N(0, 1) and χ²_k,t independent of it.
    * ``probe`` [T, k]: G_t[P] as observed (raw units; ŝ_t = ‖probe_t‖ / √k).
    * ``batch_rows`` [T]: real records in step t's batch; ``canary_rows`` [T]: canaries in it.
    * ``epoch`` [T]: the epoch of step t (0-based, from the training loop).
    * ``batch_keys`` [T] uint64: a hash of the multiset of real records in step t's batch (equal keys:
      the same records).
    * ``source``: ``"gradients"`` or ``"iterates"`` (see the module docstring).
    * ``residual`` [T, V] (optional): for each trainable variable v, ‖R_{t,v}‖² / ŝ_t², where
      R_t = G_t − α̂_t K̄_t is what is left of the observed update once the correct clipped sum of the
      observed batch, K̄_t = Σ_{every record i in the batch} clip_C(g_{t,i}), recomputed at θ_t, is
      fitted out (α̂_t: least squares over every coordinate but the probe's). Under the declared
      DP-SGD R_t is the noise alone (less one fitted dimension), so ‖R_{t,v}‖²/ŝ_t² is at most
      F(d_v, k)·d_v in distribution; ``residual_dims`` [V] are the d_v, ``residual_names`` the
      variables' names. ``None`` when the model's training step is not deterministic.
    """

    source: str
    projections: np.ndarray
    expected: np.ndarray
    present: np.ndarray
    signal: np.ndarray
    signal_observed: np.ndarray
    probe: np.ndarray
    batch_rows: np.ndarray
    canary_rows: np.ndarray
    epoch: np.ndarray
    batch_keys: np.ndarray
    residual: np.ndarray | None = None
    residual_dims: np.ndarray | None = None
    residual_names: tuple[str, ...] = ()
    #: Layers whose training output is random or batch-dependent ("Type 'name'"), as the observer found
    #: them; with any, ``residual`` is None. Empty when there are none, or the transcript is simulated.
    stochastic_layers: tuple[str, ...] = ()
    #: Per step [T], how far the gradient handed to ``apply_gradients`` fails to explain the audited
    #: weights' change under ``update_rule`` (relative; NaN: untestable; :mod:`dpaudit.training_audit.tap`).
    #: ``None`` when ``apply_gradients`` never received that gradient, or the transcript is simulated.
    update_mismatch: np.ndarray | None = None
    update_rule: str = ""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"Transcript.source must be one of {SOURCES}, got {self.source!r}")
        steps = self.projections.shape[0] if self.projections.ndim == 2 else -1
        for name in ("expected", "present"):
            if getattr(self, name).shape != self.projections.shape:
                raise ValueError(
                    f"Transcript.{name} has shape {getattr(self, name).shape}, not {self.projections.shape}"
                )
        for name in (
            "signal",
            "signal_observed",
            "batch_rows",
            "canary_rows",
            "epoch",
            "batch_keys",
        ):
            if getattr(self, name).shape != (steps,):
                raise ValueError(f"Transcript.{name} has shape {getattr(self, name).shape}, not ({steps},)")
        if self.probe.ndim != 2 or self.probe.shape[0] != steps or self.probe.shape[1] < 1:
            raise ValueError(f"Transcript.probe has shape {self.probe.shape}, not ({steps}, k >= 1)")
        if self.residual is not None:
            dims = np.asarray(self.residual_dims)
            if self.residual.shape != (steps, dims.size) or len(self.residual_names) != dims.size:
                raise ValueError(
                    f"Transcript.residual has shape {self.residual.shape}, residual_dims {dims.shape}, "
                    f"{len(self.residual_names)} names: they must agree with ({steps}, V)"
                )

    @property
    def steps(self) -> int:
        return int(self.projections.shape[0])

    @property
    def canaries(self) -> int:
        return int(self.projections.shape[1])

    @property
    def probe_dims(self) -> int:
        return int(self.probe.shape[1])

    @property
    def probe_scale(self) -> np.ndarray:
        """ŝ_t = ‖G_t[P]‖ / √k per step."""
        return np.linalg.norm(self.probe, axis=1) / np.sqrt(self.probe_dims)


def transcript_scores(transcript: Transcript, sampling_rate: float) -> np.ndarray:
    """One score per canary from the whole transcript, higher = "in".

    The log-likelihood ratio of "canary j joins each step with probability q and then adds μ_{t,j}
    along d_{t,j}" against "never joins", with unit noise along d after the probe normalisation:
    Σ_t log(1 − q + q·exp(μ_{t,j} y_{t,j} − μ_{t,j}²/2)) — the Neyman–Pearson statistic of the
    Poisson-subsampled Gaussian step (Nasr et al. 2023, "Tight Auditing of Differentially Private
    Machine Learning", §4 on scoring intermediate updates). It uses only the iterates, the canaries
    and the declared (σ, C, q), never which steps a canary actually joined, so it is a function of
    what DP-SGD releases and the one-run analysis holds for it on any mechanism.
    """
    q = float(sampling_rate)
    if not 0.0 < q <= 1.0:
        raise ValueError(f"sampling_rate must lie in (0, 1], got {sampling_rate!r}")
    mu = np.asarray(transcript.expected, dtype=np.float64)
    y = np.asarray(transcript.projections, dtype=np.float64)
    log_ratio = mu * y - 0.5 * mu * mu
    per_step = log_ratio if q >= 1.0 else np.logaddexp(np.log1p(-q), np.log(q) + log_ratio)
    scores = per_step.sum(axis=0)
    return np.where(np.isfinite(scores), scores, np.where(scores > 0, 1e300, -1e300))
