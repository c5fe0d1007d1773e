"""The power of THIS audit's bound: the smallest true ε its transcript-score bound shows above the claim.

:func:`dpaudit.training_audit.power.detectable_epsilon` answers for the ideal Gaussian canary game; the
verdict's bound is the ``steinke`` analysis (Steinke, Nasr & Jagielski 2023, Thm. 1) of
:func:`~dpaudit.training_audit.transcript.transcript_scores`, which loses much of that game's power (the
canaries' signal arrives on only the ~qT steps a canary joined, interference, the probe's noisy
normalisation). So :func:`audit_power` simulates *that* statistic, with this run's m,
inclusion count, declared (σ, C, q, T) and the canaries' own per-step signal μ_{t,j} (``expected``), under
the declared DP-SGD with its noise scaled down, σ' = σ/λ (true ε: the declaration's accountant at σ').

What one simulated run models (per run r, steps t, canaries j), the structure of
:mod:`dpaudit.training_audit.simulate` on the transcript's own numbers:

* inclusion: a uniformly random subset of the observed number of included canaries;
* presence P_{t,j}: an included canary joins each step with probability q (Poisson, as ``inert`` adds them);
* y_{t,j} = (λ (P_{t,j} μ_{t,j} + I_{t,j}) + Z_{t,j}) / u_t with Z standard normal, u_t = √(χ²_k / k)
  the probe normalisation ŝ_t of k = the run's probe coordinates (one draw per step, shared by every
  canary), plus the interference I_{t,j} = Σ_{j'} P_{t,j'} μ_{t,j'} ⟨d_{j'}, d_j⟩ of the included canaries
  present at step t, with fixed directions whose cosines are drawn once per run as independent
  N(0, 1/D) (random unit vectors in D dimensions; the Gram matrix's symmetry and rank are not kept).
  Fixed directions make the interference coherent over the run: it does not average out, and it grows
  with the signal, so m ≫ D caps the bound at any ε. D is estimated from the run
  (:func:`interference_dims`): power is not a null, so the run's own data may calibrate it.

The score is then :func:`~dpaudit.training_audit.transcript.transcript_scores`' formula on these y, and a
run is
detected when the ``steinke`` audit at ``confidence`` exceeds the claim, decided from the correct-guess
thresholds of :func:`~dpaudit.training_audit.power.guess_thresholds` (ties have probability 0). Common random
numbers (one seed per simulated audit) make each audit's outcome a function of λ alone; the 80 % point
is bisected on log λ, an audit already detected below (or missed above) the current λ not re-simulated.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from dpaudit.bounds.onerun import DEFAULT_GUESS_FRACTIONS
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.transcript import Transcript

__all__ = [
    "EPSILON_CAP",
    "AuditPower",
    "RunGeometry",
    "audit_power",
    "interference_dims",
    "run_geometry",
]

#: The largest true ε stated; beyond it :func:`audit_power` returns ``inf``.
EPSILON_CAP = 50.0
#: Simulated audits: as many as keep G·T·m under this many score terms, within [MIN_GAMES, MAX_GAMES].
WORK = 3e7
MIN_GAMES, MAX_GAMES = 64, 200


@dataclass(frozen=True)
class RunGeometry:
    """What the simulator needs from one observed run: μ_{t,j} [T, m], how many canaries were included,
    the probe's k, and the interference dimension D (``inf``: no interference seen)."""

    expected: np.ndarray
    included: int
    probe_dims: int
    interference_dims: float


def interference_dims(transcript: Transcript, included: np.ndarray) -> float:
    """D̂: how many dimensions the canaries' directions spread over, from how their noise correlates.

    The noise Z_{t,j} = ⟨ξ_t, d_j⟩ that every canary's projection carries is shared between canaries in
    proportion to ⟨d_j, d_{j'}⟩ (divided by the same ŝ_t), so over T steps the correlation r_{jj'} of two
    excluded canaries' projections has E r² ≈ ⟨d_j, d_{j'}⟩² + Σ_t a_t⁴ / (Σ_t a_t²)² (≈ 1/T; a_t² the
    step's mean square, which carries the shared 1/u_t²), and ⟨d_j, d_{j'}⟩² averages 1/D for random unit
    vectors in D dimensions. 1/D̂ = mean_{j≠j'} r_{jj'}² less that null term (``inf`` when ≤ 0).
    The noise dominates the projections at the declared σ, so this sees the geometry of a correct run
    precisely (m²/2 pairs); directions that turn during training count by their persistent part, the
    part whose interference does not average out over steps."""
    out = ~np.asarray(included, dtype=bool)
    y = np.asarray(transcript.projections, dtype=np.float64)[:, out]
    y = y[np.all(np.isfinite(y), axis=1)]
    steps, n = y.shape
    if n < 2 or steps < 3:
        return math.inf
    y = y - y.mean(axis=0)
    rows = np.mean(y * y, axis=1)  # the step's scale a_t² (1/u_t², shared by every canary)
    null = float(np.sum(rows**2) / np.sum(rows) ** 2)  # E r² of uncorrelated columns with those scales
    norms = np.linalg.norm(y, axis=0)
    y = y[:, norms > 0] / norms[norms > 0]
    n = y.shape[1]
    if n < 2:
        return math.inf
    r2 = np.sum((y.T @ y) ** 2) - n  # the off-diagonal squared correlations
    inverse = r2 / (n * (n - 1)) - null
    return 1.0 / inverse if inverse > 0 else math.inf


def run_geometry(transcript: Transcript, included: np.ndarray) -> RunGeometry:
    """The :class:`RunGeometry` of one observed run (μ from ``expected``, k from ``probe``, D̂)."""
    inc = np.asarray(included, dtype=bool).ravel()
    if inc.shape != (transcript.canaries,):
        raise ValueError(f"included has {inc.size} entries, the transcript {transcript.canaries} canaries")
    mu = np.nan_to_num(np.asarray(transcript.expected, dtype=np.float32), nan=0.0, posinf=0.0)
    return RunGeometry(mu, int(inc.sum()), transcript.probe_dims, interference_dims(transcript, inc))


def _run_scores(
    geometry: RunGeometry, q: float, lam: float, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """(scores [m], included [m]) of one simulated run at signal multiplier λ = σ/σ' (float32 inside)."""
    mu = geometry.expected
    steps, m = mu.shape
    inc = np.zeros(m, dtype=bool)
    inc[rng.permutation(m)[: geometry.included]] = True
    present = (rng.random((steps, m), dtype=np.float32) < q) & inc[None, :]
    z = rng.standard_normal((steps, m), dtype=np.float32)
    u = np.sqrt(rng.chisquare(geometry.probe_dims, size=(steps, 1)) / geometry.probe_dims).astype(np.float32)
    signal = np.where(present, mu, np.float32(0.0))
    if math.isfinite(geometry.interference_dims):  # + Σ_j' P μ ⟨d_j', d_j⟩ over the included j'
        scale = np.float32(1.0 / math.sqrt(geometry.interference_dims))
        cosines = rng.standard_normal((int(inc.sum()), m), dtype=np.float32) * scale
        cosines[np.arange(cosines.shape[0]), np.flatnonzero(inc)] = 0.0
        signal = signal + np.asarray(sparse.csr_matrix(signal[:, inc]) @ cosines, dtype=np.float32)
    lam32 = np.float32(lam)
    y = (lam32 * signal + z) / u
    x = mu * y - np.float32(0.5) * mu * mu
    # log(1 − q + q·e^x), as transcript_scores, without overflow
    per_step = x if q >= 1.0 else np.logaddexp(np.float32(math.log1p(-q)), np.float32(math.log(q)) + x)
    return per_step.sum(axis=0, dtype=np.float64), inc


class _Audits:
    """G simulated audits of the pooled runs, each with its own seed (common random numbers across λ)."""

    def __init__(
        self,
        geometries: Sequence[RunGeometry],
        q: float,
        thresholds: Sequence[tuple[int, int]],
        simulations: int,
        seed: int,
    ) -> None:
        self.geometries, self.q = list(geometries), q
        self.pairs = [(k, v) for k, v in thresholds if v <= 2 * k]
        self.seeds = np.random.SeedSequence([int(seed), 0x90E5]).spawn(simulations)

    def detected(self, game: int, lam: float) -> bool:
        rng = np.random.default_rng(self.seeds[game])
        runs = [_run_scores(g, self.q, lam, rng) for g in self.geometries]
        scores = np.concatenate([s for s, _ in runs])
        ordered = np.concatenate([i for _, i in runs])[np.argsort(scores, kind="stable")]
        inc_cum = np.concatenate([[0], np.cumsum(ordered)])  # included among the lowest x
        m = ordered.size
        for k, v in self.pairs:
            top = int(inc_cum[m] - inc_cum[m - k])
            bottom = k - int(inc_cum[k])
            if top + bottom >= v:
                return True
        return False


@dataclass(frozen=True)
class AuditPower:
    """The outcome of :func:`audit_power`: ``epsilon`` (``inf``: not reached by ``epsilon_cap``), the
    noise multiplier σ' at which it is reached (``nan`` when inf), the share of simulated audits
    detected at the search's upper end (a noise whose ε is at least the cap; the search stops early
    once 80 % is out of reach there, so a low share is a lower bound), and the number of audits."""

    epsilon: float
    noise_multiplier: float
    rate_at_cap: float
    simulations: int


@functools.lru_cache(maxsize=64)
def _cap_multiplier(cap: float, sigma: float, delta: float, q: float, steps: int) -> float:
    """The first λ of 2, 4, 8, … whose noise σ/λ has RDP ε ≥ ``cap`` (RDP is above PLD: that λ is at or
    beyond the cap under either accountant): the upper end of the search."""
    from dpaudit.training.accounting import compute_epsilon

    lam = 2.0
    while compute_epsilon(sigma / lam, q, steps, delta, "rdp") < cap and lam < 2.0**20:
        lam *= 2.0
    return lam


def audit_power(
    transcripts: Sequence[Transcript],
    included: Sequence[np.ndarray],
    declared: DeclaredDPSGD,
    *,
    confidence: float,
    power: float = 0.8,
    guess_fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS,
    seed: int = 0,
    simulations: int | None = None,
    epsilon_cap: float = EPSILON_CAP,
) -> AuditPower:
    """The smallest true ε at which this audit's bound exceeds ``declared.claimed_epsilon`` in a share
    ≥ ``power`` of simulated audits (module docstring), with its σ'. ``simulations``: by default as many
    as the work budget allows (64–200). Log-λ bisection to 0.5 %, the upper end returned."""
    from dpaudit.training.accounting import compute_epsilon
    from dpaudit.training_audit.power import guess_thresholds

    if not 0.0 < power < 1.0:
        raise ValueError(f"power must lie in (0, 1), got {power!r}")
    if not transcripts or len(transcripts) != len(included):
        raise ValueError("audit_power needs one inclusion vector per transcript, and at least one transcript")
    geometries = [run_geometry(t, i) for t, i in zip(transcripts, included, strict=True)]
    m = sum(g.expected.shape[1] for g in geometries)
    work = sum(g.expected.size + g.included * g.expected.shape[1] for g in geometries)
    games = int(simulations or min(MAX_GAMES, max(MIN_GAMES, WORK // max(work, 1))))
    q, sigma = declared.sampling_rate, declared.noise_multiplier
    thresholds = guess_thresholds(
        declared.claimed_epsilon, declared.delta, m, confidence=confidence, guess_fractions=guess_fractions
    )
    audits = _Audits(geometries, q, thresholds, games, seed)
    need = math.ceil(power * games - 1e-9)
    lam_cap = _cap_multiplier(float(epsilon_cap), sigma, declared.delta, q, declared.total_steps)
    lo, hi = 0.0, math.log(lam_cap)
    det_at = np.full(games, math.inf)  # smallest log λ at which the audit was detected
    miss_at = np.full(games, -math.inf)  # largest log λ at which it was missed

    def count(log_lam: float) -> int:
        """Audits detected at λ, or fewer than ``need`` as soon as ``need`` can no longer be reached."""
        missed = int(np.sum(miss_at >= log_lam))
        for g in range(games):
            if det_at[g] <= log_lam or miss_at[g] >= log_lam:
                continue
            if audits.detected(g, math.exp(log_lam)):
                det_at[g] = log_lam
            else:
                miss_at[g], missed = log_lam, missed + 1
                if games - missed < need:
                    break
        return int(np.sum(det_at <= log_lam))

    at_cap = count(hi)
    if at_cap < need:
        return AuditPower(math.inf, math.nan, at_cap / games, games)
    while hi - lo > 5e-3:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if count(mid) >= need else (mid, hi)
    sigma_prime = sigma / math.exp(hi)
    epsilon = compute_epsilon(sigma_prime, q, declared.total_steps, declared.delta, declared.accountant)
    if epsilon > epsilon_cap:
        return AuditPower(math.inf, math.nan, at_cap / games, games)
    return AuditPower(float(epsilon), sigma_prime, at_cap / games, games)

