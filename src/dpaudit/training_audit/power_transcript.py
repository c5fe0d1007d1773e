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
* y_{t,j} = (λ Σ_{j'} P_{t,j'} μ_{t,j'} G_{j'j} + Z_{t,j}) / u_t, the structure of the simulator (and of
  a real run): G = U Uᵀ the Gram matrix of the canaries' fixed unit directions (m random unit vectors in
  D dimensions, drawn once per simulated audit; diagonal 1, so the sum holds the canary's own signal
  and the interference of the included canaries present at step t), Z_t = ξ_t Uᵀ the step's noise
  projected on those same directions (N(0, G): correlated across canaries), and u_t = √(χ²_k / k) the
  probe normalisation ŝ_t of k = the run's probe coordinates (one draw per step, shared by every
  canary). G enters through a factor F (F Fᵀ = G) of rank min(m, D): the vectors themselves when D < m,
  the row-normalised Bartlett factor of a Wishart(D, I) when D ≥ m (O(m²) draws, any real D), so a
  simulated audit costs 3·T·m·rank flops. Where D > 20 m the coupling is negligible and the cheap
  independent model is kept: independent Z, cosines N(0, 1/D) per ordered pair. Fixed directions make
  the interference coherent over the run: it does not average out, and it grows with the signal, so
  m ≫ D caps the bound at any ε. D is estimated from the run (:func:`interference_dims`, against a
  simulated null so that its bias is well below 1/D): power is not a null, so the run's own data may
  calibrate it.

Speed: x_{t,j} = μ y − μ²/2 = λ·a + b with a, b independent of λ, so each simulated audit draws its
run once and keeps (a, b) across the bisection while they fit in ``CACHE_BYTES`` (redrawn from its
seed otherwise); the number of audits (64–200) follows the work budgets ``WORK`` and ``FLOPS``.

The score is then :func:`~dpaudit.training_audit.transcript.transcript_scores`' formula on these y, and a
run is detected when the ``steinke`` audit at ``confidence`` exceeds the claim, decided from the correct-guess
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
#: ... and their exact Gram structure under this many flops (3·T·m·rank each).
FLOPS = 4e10
#: Bytes of λ-independent parts kept across the bisection (the rest is redrawn from its seed).
CACHE_BYTES = 200_000_000
#: D̂ above this many times m: the independent model (the Gram matrix's coupling is then negligible).
INDEPENDENT_ABOVE = 20
#: Simulated null draws of :func:`interference_dims` (each T·n² flops).
NULL_DRAWS = 4


@dataclass(frozen=True)
class RunGeometry:
    """What the simulator needs from one observed run: μ_{t,j} [T, m], how many canaries were included,
    the probe's k, and the interference dimension D (``inf``: no interference seen)."""

    expected: np.ndarray
    included: int
    probe_dims: int
    interference_dims: float


def _mean_r2(y: np.ndarray) -> float:
    """Mean squared correlation over the pairs of distinct columns of y [T, n] (centred per column)."""
    y = y - y.mean(axis=0)
    norms = np.linalg.norm(y, axis=0)
    y = y[:, norms > 0] / norms[norms > 0]
    n = y.shape[1]
    return float((np.sum((y.T @ y) ** 2) - n) / (n * (n - 1))) if n > 1 else 0.0


def interference_dims(transcript: Transcript, included: np.ndarray) -> float:
    """D̂: how many dimensions the canaries' directions spread over, from how their noise correlates.

    The noise Z_{t,j} = ⟨ξ_t, d_j⟩ that every canary's projection carries is shared between canaries in
    proportion to ⟨d_j, d_{j'}⟩ (divided by the same ŝ_t), so over T steps the correlation r_{jj'} of two
    excluded canaries' projections has E r² ≈ ⟨d_j, d_{j'}⟩² + the null term (≈ 1/(T − 1), inflated by
    the spread of the steps' scales a_t², which carry the shared 1/u_t²), and ⟨d_j, d_{j'}⟩² averages 1/D
    for random unit vectors in D dimensions. 1/D̂ = mean_{j≠j'} r_{jj'}² less that null term, the mean
    of the same statistic on ``NULL_DRAWS`` independent columns with those scales (``inf`` when ≤ 0):
    at T ≈ 200 and D ≫ T, 1/D is a few per cent of the null, so the ratio approximation
    Σ a⁴ / (Σ a²)² (and the uncentred 1/T) overestimated D by 10–50 %.
    The noise dominates the projections at the declared σ, so this sees the geometry of a correct run
    precisely (m²/2 pairs); directions that turn during training count by their persistent part, the
    part whose interference does not average out over steps."""
    out = ~np.asarray(included, dtype=bool)
    y = np.asarray(transcript.projections, dtype=np.float64)[:, out]
    y = y[np.all(np.isfinite(y), axis=1)]
    steps, n = y.shape
    if n < 2 or steps < 3:
        return math.inf
    rows = np.mean((y - y.mean(axis=0)) ** 2, axis=1)  # the step's scale a_t² (1/u_t², every canary's)
    # â_t² = a_t²·χ²_n/n: shrink its spread across steps to that of a_t² (E â⁴ = a⁴ (1 + 2/n))
    mean, spread = float(rows.mean()), float(np.mean(rows**2) - rows.mean() ** 2)
    true_spread = float(np.mean(rows**2) / (1 + 2 / n) - mean**2)
    scales = mean + (rows - mean) * math.sqrt(max(true_spread, 0.0) / spread) if spread > 0 else rows
    # the null E r² of uncorrelated columns with those scales, by simulation: at T ≈ 200 the ratio
    # approximation's O(1/T²) error is of the order of 1/D itself
    rng = np.random.default_rng(0x0D1)
    null = float(np.mean([_mean_r2(rng.standard_normal((steps, n)) * np.sqrt(scales)[:, None])
                          for _ in range(NULL_DRAWS)]))  # fmt: skip
    inverse = _mean_r2(y) - null
    return 1.0 / inverse if inverse > 0 else math.inf


def run_geometry(transcript: Transcript, included: np.ndarray) -> RunGeometry:
    """The :class:`RunGeometry` of one observed run (μ from ``expected``, k from ``probe``, D̂)."""
    inc = np.asarray(included, dtype=bool).ravel()
    if inc.shape != (transcript.canaries,):
        raise ValueError(f"included has {inc.size} entries, the transcript {transcript.canaries} canaries")
    mu = np.nan_to_num(np.asarray(transcript.expected, dtype=np.float32), nan=0.0, posinf=0.0)
    return RunGeometry(mu, int(inc.sum()), transcript.probe_dims, interference_dims(transcript, inc))


def _gram_factor(m: int, dims: float, rng: np.random.Generator) -> np.ndarray:
    """F [m, r], r = min(m, D), with F Fᵀ = G, the Gram matrix of m random unit vectors in D dimensions.

    D < m: the vectors themselves (⌈D⌉ Gaussian coordinates, rows normalised). D ≥ m: the Bartlett
    factor of X Xᵀ ~ Wishart(D, I) (lower triangular, A_ii² ~ χ²(D − i), A_ij ~ N(0, 1) below the
    diagonal), rows normalised: the same G at O(m²) draws, for any real D ≥ m."""
    if dims < m:
        factor = rng.standard_normal((m, max(1, math.ceil(dims))))
    else:
        factor = np.zeros((m, m), dtype=np.float32)
        factor[np.tril_indices(m, -1)] = rng.standard_normal(m * (m - 1) // 2, dtype=np.float32)
        factor[np.diag_indices(m)] = np.sqrt(rng.chisquare(dims - np.arange(m)))
    factor /= np.linalg.norm(factor, axis=1, keepdims=True)
    return factor.astype(np.float32, copy=False)


def _rank(geometry: RunGeometry) -> int:
    """The rank of the modelled Gram matrix (0: the independent model)."""
    m, dims = geometry.expected.shape[1], geometry.interference_dims
    return min(m, math.ceil(dims)) if dims <= INDEPENDENT_ABOVE * m else 0


def _run_parts(geometry: RunGeometry, q: float, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(a, b, included) of one simulated run: its per-step log-ratios are x = λ·a + b at signal
    multiplier λ = σ/σ' (a = μ·signal/u, b = μ·Z/u − μ²/2; float32), λ-independent, so cached."""
    mu = geometry.expected
    steps, m = mu.shape
    inc = np.zeros(m, dtype=bool)
    inc[rng.permutation(m)[: geometry.included]] = True
    present = (rng.random((steps, m), dtype=np.float32) < q) & inc[None, :]
    u = np.sqrt(rng.chisquare(geometry.probe_dims, size=(steps, 1)) / geometry.probe_dims).astype(np.float32)
    signal = np.where(present, mu, np.float32(0.0))
    dims = geometry.interference_dims
    if _rank(geometry):  # the exact Gram structure: signal·G and noise ξ Uᵀ ~ N(0, G)
        factor = _gram_factor(m, dims, rng)
        z = rng.standard_normal((steps, factor.shape[1]), dtype=np.float32) @ factor.T
        signal = (signal[:, inc] @ factor[inc]) @ factor.T
    else:  # D ≫ m: independent noise, cosines N(0, 1/D) per ordered pair (+ Σ_j' P μ ⟨d_j', d_j⟩)
        z = rng.standard_normal((steps, m), dtype=np.float32)
        if math.isfinite(dims):
            cosines = rng.standard_normal((int(inc.sum()), m), dtype=np.float32) * np.float32(dims**-0.5)
            cosines[np.arange(cosines.shape[0]), np.flatnonzero(inc)] = 0.0
            signal = signal + np.asarray(sparse.csr_matrix(signal[:, inc]) @ cosines, dtype=np.float32)
    return mu * signal / u, mu * z / u - np.float32(0.5) * mu * mu, inc


def _scores(a: np.ndarray, b: np.ndarray, q: float, lam: float) -> np.ndarray:
    """Σ_t log(1 − q + q·e^x), x = λ·a + b: ``transcript_scores``' formula without overflow."""
    x = np.float32(lam) * a + b
    per_step = x if q >= 1.0 else np.logaddexp(np.float32(math.log1p(-q)), np.float32(math.log(q)) + x)
    return per_step.sum(axis=0, dtype=np.float64)


class _Audits:
    """G simulated audits of the pooled runs, each with its own seed (common random numbers across λ);
    each audit's λ-independent parts are drawn once and kept while they fit in ``CACHE_BYTES``."""

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
        per_audit = sum(8 * g.expected.size for g in self.geometries)
        self.cached = CACHE_BYTES // max(per_audit, 1)
        self.cache: dict[int, list[tuple[np.ndarray, ...]]] = {}

    def _parts(self, game: int) -> list[tuple[np.ndarray, ...]]:
        if game in self.cache:
            return self.cache[game]
        rng = np.random.default_rng(self.seeds[game])
        parts = [_run_parts(g, self.q, rng) for g in self.geometries]
        if len(self.cache) < self.cached:
            self.cache[game] = parts
        return parts

    def detected(self, game: int, lam: float) -> bool:
        runs = self._parts(game)
        scores = np.concatenate([_scores(a, b, self.q, lam) for a, b, _ in runs])
        ordered = np.concatenate([i for _, _, i in runs])[np.argsort(scores, kind="stable")]
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
    work = sum(g.expected.size for g in geometries)
    flops = sum(3 * g.expected.size * _rank(g) for g in geometries)
    budget = min(WORK // max(work, 1), FLOPS // max(flops, 1))
    games = int(simulations or min(MAX_GAMES, max(MIN_GAMES, budget)))
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
