"""Validity suite: every estimator that can reach a headline, on mechanisms whose ε(δ) is known exactly.

A lower bound stated at level c may exceed the true ε(δ) in at most a 1 − c share of repeats. This
script draws scores from mechanisms with exactly known ε(δ) — randomised response, Laplace, a
discrete mechanism with heavy ties, the Gaussian mechanism, the Poisson-subsampled Gaussian over T
steps — and runs them through the same public paths users take: the ``dpaudit scores`` command
(in-process, files on disk, JSON output), :func:`dpaudit.bounds.auditor.one_run_lower_bound`, the
canaries audit's per-model headline, the instantiation audit's per-step bound
(``validity_stepwise.py``), the one-run analyses (``validity_onerun.py``), and the TPR-at-FPR interval
with the canaries audit's "canaries above population" finding (``validity_rates.py``). Inputs arrive in an
adversarial order (excluded / out trials first, sorted scores), and δ = 0 and δ > 0 are both
tried. It prints one row per check — the overclaim rate with its Monte Carlo standard error — and
exits non-zero if any rate exceeds 1 − c + 2 s.e., or if a result depends on the order of its input.

    python benchmarks/validity.py            # the full suite (a few minutes on 2 cores)
    python benchmarks/validity.py --quick    # the reduced suite the tests run (< 60 s)

Exact ε(δ) (hockey-stick divergence, both directions): discrete mechanisms by bisection on
Σ max(0, P − e^ε Q); Laplace with scale 1/ε₀ and sensitivity 1: ε(δ) = ε₀ + 2 ln(1 − δ); the Gaussian
mechanism: Balle & Wang's analytic curve (:func:`dpaudit.bounds.tradeoff.gdp_epsilon`); the
subsampled Gaussian: dp_accounting's OPTIMISTIC PLD at a 1e-4 grid (below the true ε, so the check
errs towards flagging overclaims).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpaudit import cli
from dpaudit.bounds.auditor import audit_scores, one_run_lower_bound
from dpaudit.bounds.tradeoff import gdp_epsilon
from dpaudit.experiments.canaries.bounds import per_model_bounds

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by file path (the tests): find the shared helpers and siblings
    sys.path.insert(0, str(HERE))
import validity_onerun  # noqa: E402
import validity_rates  # noqa: E402
import validity_stepwise  # noqa: E402
import validity_transcript  # noqa: E402
from _validity_common import LEVEL, row, table  # noqa: E402, F401 (table: the tests print it)
from _validity_common import main as run_main  # noqa: E402

# ----------------------------------------------------------------------------------- mechanisms


@dataclass(frozen=True)
class Mechanism:
    """A neighbouring pair: ``sample(rng, n, member)`` draws n outputs; ``epsilon(δ)`` is exact."""

    name: str
    sample: Callable[[np.random.Generator, int, bool], np.ndarray]
    epsilon: Callable[[float], float]
    deltas: tuple[float, ...] = (0.0, 1e-5)


def discrete_epsilon(p: np.ndarray, q: np.ndarray, delta: float) -> float:
    """Smallest ε with Σ max(0, P − e^ε Q) ≤ δ in both directions (bisection to 1e-10)."""

    def excess(eps: float) -> float:
        return max(float(np.sum(np.maximum(0.0, a - math.exp(eps) * b))) for a, b in ((p, q), (q, p)))

    lo, hi = 0.0, 50.0
    if excess(lo) <= delta:
        return 0.0
    while hi - lo > 1e-10:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if excess(mid) <= delta else (mid, hi)
    return hi


def discrete(name: str, member: np.ndarray, nonmember: np.ndarray) -> Mechanism:
    values = np.arange(member.size, dtype=float)

    def sample(rng: np.random.Generator, n: int, is_member: bool) -> np.ndarray:
        return rng.choice(values, size=n, p=member if is_member else nonmember)

    return Mechanism(name, sample, lambda delta: discrete_epsilon(member, nonmember, delta))


def randomised_response(eps: float) -> Mechanism:
    p = math.exp(eps) / (1.0 + math.exp(eps))
    return discrete(f"randomised response, ε = {eps:g}", np.array([1 - p, p]), np.array([p, 1 - p]))


def heavy_ties() -> Mechanism:
    """Five output values, most trials tied; pure ε = ln 4."""
    member = np.array([0.05, 0.15, 0.3, 0.3, 0.2])
    return discrete("discrete, 5 values (ties), ε = ln 4", member, member[::-1].copy())


def laplace(eps: float) -> Mechanism:
    def sample(rng: np.random.Generator, n: int, is_member: bool) -> np.ndarray:
        return float(is_member) + rng.laplace(0.0, 1.0 / eps, n)

    return Mechanism(f"Laplace, ε = {eps:g}", sample, lambda delta: eps + 2.0 * math.log1p(-delta))


def gaussian(mu: float) -> Mechanism:
    def sample(rng: np.random.Generator, n: int, is_member: bool) -> np.ndarray:
        return mu * float(is_member) + rng.normal(0.0, 1.0, n)

    return Mechanism(f"Gaussian, μ = {mu:g}", sample, lambda delta: gdp_epsilon(mu, delta), deltas=(1e-5,))


def subsampled_gaussian(z: float, q: float, steps: int) -> Mechanism:
    """T Poisson-subsampled Gaussian releases; the score is the optimal (log-likelihood-ratio) test."""

    def sample(rng: np.random.Generator, n: int, is_member: bool) -> np.ndarray:
        shift = (rng.random((n, steps)) < q) if is_member else np.zeros((n, steps), bool)
        x = shift + rng.normal(0.0, z, (n, steps))
        return np.sum(np.log1p(q * np.expm1((2.0 * x - 1.0) / (2.0 * z * z))), axis=1)

    def epsilon(delta: float) -> float:
        from dp_accounting.pld import privacy_loss_distribution as pld_lib

        pld = pld_lib.from_gaussian_mechanism(
            z, sampling_prob=q, value_discretization_interval=1e-4, pessimistic_estimate=False,
            use_connect_dots=False,  # connect-the-dots is pessimistic only
        ).self_compose(steps)
        return float(pld.get_epsilon_for_delta(delta))

    name = f"subsampled Gaussian, z = {z:g}, q = {q:g}, T = {steps}"
    return Mechanism(name, sample, epsilon, deltas=(1e-5,))


# ----------------------------------------------------------------------------------- the CLI path


def run_cli(args: list[str]) -> dict:
    """``dpaudit <args> --json`` in-process; returns the parsed JSON (exit status must be 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main([*args, "--json"])
    if status != 0:
        raise RuntimeError(f"dpaudit {' '.join(args)} exited {status}")
    return json.loads(out.getvalue())


def cli_headline(pos: np.ndarray, neg: np.ndarray, delta: float, extra: list[str], folder: Path) -> float:
    """The headline ε of ``dpaudit scores`` on these scores, fed in an adversarial order (sorted)."""
    np.save(folder / "in.npy", np.sort(pos)[::-1])
    np.save(folder / "out.npy", np.sort(neg))
    result = run_cli(["scores", "--in", str(folder / "in.npy"), "--out", str(folder / "out.npy"),
                      "--delta", repr(delta), "--confidence", str(LEVEL), *extra])  # fmt: skip
    if result["headline"]["confidence"] != LEVEL:
        raise AssertionError(f"headline level {result['headline']['confidence']} != asked {LEVEL}")
    value = result["headline"]["epsilon_lower"]
    return math.inf if value is None else float(value)


# ----------------------------------------------------------------------------------- checks


def scores_checks(quick: bool, seed: int) -> list[dict]:
    """``dpaudit scores``: the default headline (assumption-free) on every mechanism, δ = 0 and δ > 0;
    ``--assume gaussian`` / ``--assume subsampled`` on the mechanisms that guarantee them."""
    n = 1000
    repeats = 40 if quick else 200
    cases: list[tuple[Mechanism, list[str], int]] = [
        (randomised_response(1.0), [], repeats),
        (laplace(1.0), [], repeats),
        (heavy_ties(), [], repeats),
        (gaussian(1.0), [], repeats),
        (gaussian(1.0), ["--assume", "gaussian"], repeats),
        (subsampled_gaussian(1.0, 0.5, 4), ["--assume", "subsampled", "--q", "0.5", "--steps", "4"],
         8 if quick else 60),
    ]  # fmt: skip
    if quick:
        cases = [cases[0], cases[2], cases[4], cases[5]]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for k, (mechanism, extra, reps) in enumerate(cases):
            for delta in mechanism.deltas:
                truth = mechanism.epsilon(delta)
                rng = np.random.default_rng([seed, k, int(delta > 0)])
                over = 0
                for _ in range(reps):
                    pos, neg = mechanism.sample(rng, n, True), mechanism.sample(rng, n, False)
                    over += cli_headline(pos, neg, delta, extra, folder) > truth
                flags = " ".join(extra[:2]) or "no --assume"
                setting = f"{flags}, n = {n}/world, δ = {delta:g}, ε(δ) = {truth:.4g}"
                rows.append(row("dpaudit scores headline", mechanism.name, setting, over, reps))
    return rows


def one_run_checks(quick: bool, seed: int) -> list[dict]:
    """Steinke et al.'s one-run bound on one run's canaries, excluded canaries listed first.

    The auditor's default headline for such scores counts the one-run bound alone: a threshold sweep
    needs one independent run per trial, which canaries sharing a run are not, so the sweeps are
    estimates there (their overclaim rate is shown for information, not checked)."""
    rows = []
    for mechanism in (randomised_response(1.0), laplace(1.0)):
        for m in (1000,) if quick else (1000, 10_000):
            reps = 40 if quick else 200
            for delta in (0.0, 1e-5):
                truth = mechanism.epsilon(delta)
                rng = np.random.default_rng([seed, m, int(delta > 0), 7, len(rows)])
                over_direct = over_auditor = over_sweep = 0
                for r in range(reps):
                    included = np.sort(rng.random(m) < 0.5)  # excluded first: the order that once leaked
                    drawn_in, drawn_out = mechanism.sample(rng, m, True), mechanism.sample(rng, m, False)
                    scores = np.where(included, drawn_in, drawn_out)
                    k = m // 10
                    direct = one_run_lower_bound(
                        scores, included, k_positive=k, k_negative=k, delta=delta, seed=r
                    )
                    over_direct += direct.epsilon > truth
                    audit = audit_scores(scores[included], scores[~included], delta=delta, seed=r,
                                         one_run=True, fpr_levels=(0.01,))  # fmt: skip
                    assert audit.headline.details["counted_bounds"] == 1.0, "a sweep reached the headline"
                    over_auditor += audit.headline.epsilon > truth
                    over_sweep += audit.lower_bounds["sweep_split"].epsilon > truth
                setting = f"m = {m}, δ = {delta:g}, ε(δ) = {truth:.4g}"
                name = mechanism.name
                rows.append(row("one_run_lower_bound (k± = m/10)", name, setting, over_direct, reps))
                rows.append(row("audit_scores one-run headline", name, setting, over_auditor, reps))
                info = row("sweep_split on one run (estimate)", mechanism.name, setting, over_sweep, reps)
                rows.append({**info, "ok": True, "stated_level": float("nan")})
    return rows


def canaries_checks(quick: bool, seed: int) -> list[dict]:
    """The canaries audit's per-model headline: best of three canary types, randomised response."""
    mechanism = randomised_response(1.0)
    reps, models = (30, 300) if quick else (200, 400)
    ctype = np.repeat([1, 2, 3], 4)
    rng = np.random.default_rng([seed, 11])
    truth = mechanism.epsilon(1e-5)
    over = 0
    for _ in range(reps):
        membership = rng.random((ctype.size, models)) < 0.5
        p = math.exp(1.0) / (1.0 + math.exp(1.0))
        scores = (membership ^ (rng.random(membership.shape) >= p)).astype(float)
        found = per_model_bounds(scores, membership, ctype, [1, 2, 3], 1e-5, LEVEL, None, (0.01,))
        over += max(found.values(), default=0.0) > truth
    return [row("canaries per-model headline (3 types)", mechanism.name, f"{models} models, δ = 1e-05",
                over, reps)]  # fmt: skip


def invariance_checks(seed: int, permutations: int = 20) -> list[dict]:
    """The same multiset of scores in ``permutations`` random orders gives identical results."""
    rng = np.random.default_rng([seed, 99])
    mechanism = heavy_ties()
    pos, neg = mechanism.sample(rng, 500, True), mechanism.sample(rng, 500, False)
    included = np.concatenate([np.ones(500, bool), np.zeros(500, bool)])
    scores = np.concatenate([pos, neg])

    def results(order_pos: np.ndarray, order_neg: np.ndarray, order_all: np.ndarray) -> tuple:
        audit = audit_scores(pos[order_pos], neg[order_neg], delta=1e-5, one_run=True, fpr_levels=(0.01,))
        one = one_run_lower_bound(scores[order_all], included[order_all], k_positive=50, k_negative=50,
                                  delta=1e-5)  # fmt: skip
        return (*(b.epsilon for b in audit.lower_bounds.values()), audit.headline.epsilon, one.epsilon)

    reference = results(np.arange(500), np.arange(500), np.arange(1000))
    differ = sum(
        results(rng.permutation(500), rng.permutation(500), rng.permutation(1000)) != reference
        for _ in range(permutations)
    )
    out = row("every auditor estimator + one-run", mechanism.name, "input order permuted", differ,
              permutations)  # fmt: skip
    out["ok"] = differ == 0
    out["stated_level"] = float("nan")
    return [out]


def run(quick: bool = False, seed: int = 0) -> list[dict]:
    """Every check's row (see :func:`row`), the sibling suites' rows included."""
    rows = scores_checks(quick, seed) + one_run_checks(quick, seed) + canaries_checks(quick, seed)
    rows += invariance_checks(seed)
    rows += validity_transcript.run(quick=quick, seed=seed) + validity_rates.run(quick=quick, seed=seed)
    return rows + validity_stepwise.run(quick=quick, seed=seed) + validity_onerun.run(quick=quick, seed=seed)


def main(argv: list[str] | None = None) -> int:
    """Run the suite (``--quick``: the reduced one) and print its table; exit status 1 on any failure."""
    return run_main(run, __doc__.splitlines()[0], "the reduced suite (< 60 s)", argv)


if __name__ == "__main__":
    sys.exit(main())
