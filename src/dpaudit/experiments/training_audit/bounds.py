"""Bounds stage of the training audit: the verdict of the stored runs against the declared DP-SGD.

:func:`dpaudit.training_audit.verdict.decide` pools every run's canaries into one ε lower bound (the
one-run analysis of the transcript scores) and runs every check of every run at the joint level
``bounds.confidence``. The metrics hold numbers only (``caught``, ε lower / claimed / detectable, each
check's p-value, level share and status code); the words (status, messages, warnings) travel in the
section's context. Per-step plots of the first run, each with its per-step 95 % null band under the
declared mechanism: the canaries' signal to noise, the noise scale and the clipped-sum residual.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from dpaudit.bounds.accountants import epsilons_for_event
from dpaudit.experiments.base import BoundsResult, TrainManifest, finite_number
from dpaudit.experiments.training_audit.config import TrainingAuditConfig, declared_dpsgd
from dpaudit.experiments.training_audit.design import RUNS_FILE, library, load_runs
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow
from dpaudit.table import ResultRow, ResultsTable

#: Score keys of the summary row (and of metrics/summary.json), with their labels.
SCORES = {
    "epsilon_claimed": "claimed ε",
    "epsilon_detectable": "detectable ε (80 % power)",
    "caught": "caught",
}
#: The bound's estimator: Steinke et al.'s one-run analysis of the transcript scores of the user's run(s).
ESTIMATOR = "one-run analysis of the transcript scores"
#: Status codes of a check in the metrics (numbers only there; the words are in the section).
STATUS_CODES = {"passed": 0.0, "rejected": 1.0, "skipped": 2.0, "not applicable": 3.0}
#: The per-step null bands' two-sided level.
BAND = 0.95


def step_frames(transcript: Any, probe_dims: int) -> dict[str, pd.DataFrame]:
    """Per-step evidence of one run with its per-step null band (``BAND``) under the declared DP-SGD.

    - signal to noise: observed a_t against the declared b_t, band b_t ± z·√(1 + b_t²/(2k)) (a_t =
      (b_t + Z)/√(χ²_k/k), normal approximation); steps without a canary are left out;
    - noise scale: ŝ_t over its median, band from √(χ²_k/k);
    - residual: Σ_v ‖R_{t,v}‖²/ŝ_t² over Σ_v d_v, band from F(Σ d_v, k) (absent when not recorded).
    """
    z = stats.norm.ppf(0.5 + BAND / 2)
    lo, hi = (1 - BAND) / 2, 1 - (1 - BAND) / 2
    k = max(int(probe_dims), 1)
    steps = np.arange(transcript.steps)
    b = np.asarray(transcript.signal, float)
    a = np.asarray(transcript.signal_observed, float)
    on = b > 0
    half = z * np.sqrt(1 + b**2 / (2 * k))
    frames = {
        "signal_to_noise.csv": pd.DataFrame(
            {
                "step": steps[on],
                "observed": a[on],
                "declared": b[on],
                "band_low": (b - half)[on],
                "band_high": (b + half)[on],
            }
        ),
    }
    scale = np.asarray(transcript.probe_scale, float)
    median = float(np.median(scale)) if scale.size and np.median(scale) > 0 else 1.0
    chi = np.sqrt(stats.chi2.ppf([lo, hi], k) / k) * np.sqrt(k / stats.chi2.ppf(0.5, k))
    frames["noise_scale.csv"] = pd.DataFrame(
        {
            "step": steps,
            "noise_scale": scale / median,
            "band_low": np.full(steps.size, chi[0]),
            "band_high": np.full(steps.size, chi[1]),
        }
    )
    if transcript.residual is not None:
        dims = float(np.sum(transcript.residual_dims))
        ratio = np.sum(np.asarray(transcript.residual, float), axis=1) / dims
        f_lo, f_hi = stats.f.ppf([lo, hi], dims, k)
        frames["residual.csv"] = pd.DataFrame(
            {
                "step": steps,
                "residual": ratio,
                "band_low": np.full(steps.size, f_lo),
                "band_high": np.full(steps.size, f_hi),
            }
        )
    return frames


def _finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def bounds(config: TrainingAuditConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """The verdict, its numbers, the per-step plots of the first run and the summary row."""
    from dpaudit.experiments.training_audit.config import Declared
    facts = manifest.facts
    declared = declared_dpsgd(Declared(**facts["declared"]), int(facts["dataset_size"]))
    transcripts, included = load_runs(audit.train_dir / RUNS_FILE)
    verdict = library("verdict").decide(
        transcripts,
        included,
        declared,
        confidence=config.bounds.confidence,
        seed=int(manifest.seeds["audit"]),
    )
    record = verdict.as_dict()
    caught = 1.0 if verdict.caught else 0.0
    upper = {
        k: finite_number(v)
        for k, v in epsilons_for_event(manifest.mechanisms["declared"].dp_event(), manifest.delta).items()
    }
    checks: dict[str, dict[str, float]] = {}
    for c in verdict.checks:
        entry = {"status": STATUS_CODES.get(c.status, -1.0), "level": float(c.level)}
        if c.p_value is not None and math.isfinite(float(c.p_value)):
            entry["p_value"] = float(c.p_value)
        name = c.name
        n = 2
        while name in checks:  # one entry per run for checks that run per run
            name, n = f"{c.name}_{n}", n + 1
        checks[name] = entry
    metrics: dict[str, Any] = {
        "verdict": {
            "caught": caught,
            "epsilon_lower": finite_number(verdict.epsilon_lower),
            "epsilon_claimed": finite_number(verdict.claimed_epsilon),
            "epsilon_detectable": finite_number(verdict.detectable_epsilon),
            "confidence": float(verdict.confidence),
            "runs": float(verdict.runs),
            "canaries": float(verdict.bound.canaries),
            "included": float(verdict.included),
            "mismatches": float(len(verdict.mismatches)),
            "skipped": float(len(verdict.skipped)),
        },
        "checks": checks,
        "epsilon_upper": upper,
    }
    row = SummaryRow(
        setting=f"{facts['function']} with {_options(facts['options'])}",
        epsilon_upper=upper,
        epsilon_lower=float(verdict.epsilon_lower),
        epsilon_lower_estimator=ESTIMATOR,
        scores={
            "epsilon_claimed": float(verdict.claimed_epsilon),
            "epsilon_detectable": _finite_or_none(verdict.detectable_epsilon),
            "caught": caught,
        },
        epsilon_lower_assumes="one-run",
        tried=f"{verdict.bound.canaries} canaries in {verdict.runs} run(s) and {len(verdict.checks)} checks",
        confidence=float(verdict.confidence),
    )
    context = {
        "verdict": _json_safe(record),
        "headline": verdict.headline(),
        "text": str(verdict),
        "declaration": verdict.declaration,
        "probe_dims": int(transcripts[0].probe_dims),
    }
    plots = step_frames(transcripts[0], transcripts[0].probe_dims)
    table = ResultsTable(
        [
            ResultRow(
                "", "epsilon_lower", float(verdict.epsilon_lower), ESTIMATOR, "bound",
                level=float(verdict.bound.confidence), assumes="one-run", counted=True,
            ),
            *(ResultRow("", "epsilon_upper", v, k, "accountant") for k, v in upper.items()),
        ]
    )  # fmt: skip
    return BoundsResult(metrics, plots, [row], context, table=table)


def _json_safe(value: Any) -> Any:
    """``value`` with every non-finite float as None (the section is strict JSON)."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _options(options: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in sorted(options.items())) or "no options"
