"""Identifiability audit (Bernau et al. §5–6): DP-SGD on D or D′, audited by A_DI,Gau.

For every configuration of the grid ρβ × sensitivity {global, local} × neighbours {bounded,
unbounded}: ε = ln(ρβ/(1−ρβ)) (Eq. 10), z from ε by the RDP accountant with q = 1 and k steps,
δ = 1/|D| unless set. Each trial draws its world b ∈ {D, D′} uniformly and trains full-batch
DP-SGD for k epochs with σ_i = z·Δf_i, where Δf_i is C (unbounded) or 2C (bounded) for global
sensitivity, or the local sensitivity LS_i of the step (Eqs. 19, 21). D′ comes from the dataset
sensitivity search (Def. 6): unbounded D′ = D \\ {x̂}; bounded D′ = D with x̂ replaced by x̂′.
The adversary's per-step likelihood ratios are recorded during training; the attack stage runs
Algorithm 1, the loss-threshold MI adversary (Yeom et al.) on the differing record, and the bounds
stage reports Adv, δ′, ε′ three ways (§5.3), Table 2 and Figs. 4–9 data.

The update divides the noisy sum by |D| in both worlds, so the scale of an update does not
itself reveal whether D or D′ (one record fewer) was used.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpaudit.attacks import di
from dpaudit.bounds.accountants import (
    all_epsilons,
    calibrate_noise_multiplier,
    rdp_epsilon_and_order,
)
from dpaudit.bounds.empirical import epsilon_lower_from_scores
from dpaudit.bounds.identifiability import epsilon_from_rho_beta, rho_alpha_from_epsilon, rho_alpha_from_rdp
from dpaudit.config import ParamsError, from_mapping, require, section
from dpaudit.data.prepared import PreparedData
from dpaudit.experiments import Audit
from dpaudit.io import read_json, write_json, write_npz
from dpaudit.report.spec import FigureSpec, ReportSection, SummaryRow, TableSpec
from dpaudit.sensitivity.search import SensitivityResult
from dpaudit.training import dpsgd, models

log = logging.getLogger(__name__)

Sensitivity = Literal["global", "local"]
Neighbours = Literal["bounded", "unbounded"]


@dataclass(frozen=True)
class ModelSettings:
    """Per-dataset settings: hidden layer sizes (MLP) or conv filters (mnist/cifar10 CNN), and
    optional replacements of the section's ``learning_rate`` and ``trials`` for this dataset."""

    hidden: list[int]
    learning_rate: float | None = None
    trials: int | None = None

    def __post_init__(self) -> None:
        require(
            len(self.hidden) >= 1 and all(h >= 1 for h in self.hidden),
            "identifiability.models.*.hidden",
            self.hidden,
            "must list at least one positive layer size",
        )


def _default_models() -> dict[str, ModelSettings]:
    return {name: ModelSettings(list(h)) for name, h in models.DEFAULT_HIDDEN.items()}


@dataclass(frozen=True)
class IdentifiabilityConfig:
    """The ``identifiability`` section of params.yaml (Bernau et al. §6 defaults)."""

    rho_beta: list[float] = field(default_factory=lambda: [0.52, 0.75, 0.9, 0.99])
    sensitivities: list[Sensitivity] = field(default_factory=lambda: ["global", "local"])  # type: ignore[arg-type]
    neighbours: list[Neighbours] = field(default_factory=lambda: ["bounded", "unbounded"])  # type: ignore[arg-type]
    trials: int = 200
    epochs: int = 30
    learning_rate: float = 0.005
    clip_norm: float = 3.0
    delta: float | None = None
    seed: int = 0
    confidence: float = 0.95
    reference_rho_beta: float = 0.9
    candidate_trials: int = 20
    chunk_size: int | None = None
    models: dict[str, ModelSettings] = field(default_factory=_default_models)

    def __post_init__(self) -> None:
        w = "identifiability"
        require(len(self.rho_beta) >= 1, f"{w}.rho_beta", self.rho_beta, "must list at least one value")
        for rb in self.rho_beta:
            require(0.5 < rb < 1.0, f"{w}.rho_beta", self.rho_beta, "every value must lie in (0.5, 1)")
        require(
            len(set(self.rho_beta)) == len(self.rho_beta), f"{w}.rho_beta", self.rho_beta, "has duplicates"
        )
        require(
            len(self.sensitivities) >= 1 and len(set(self.sensitivities)) == len(self.sensitivities),
            f"{w}.sensitivities",
            self.sensitivities,
            "must list global and/or local once each",
        )
        require(
            len(self.neighbours) >= 1 and len(set(self.neighbours)) == len(self.neighbours),
            f"{w}.neighbours",
            self.neighbours,
            "must list bounded and/or unbounded once each",
        )
        require(self.trials >= 2, f"{w}.trials", self.trials, "must be at least 2")
        require(self.epochs >= 1, f"{w}.epochs", self.epochs, "must be at least 1")
        require(self.learning_rate > 0, f"{w}.learning_rate", self.learning_rate, "must be positive")
        require(self.clip_norm > 0, f"{w}.clip_norm", self.clip_norm, "must be positive")
        require(
            self.delta is None or 0 < self.delta < 1, f"{w}.delta", self.delta, "must be null or in (0, 1)"
        )
        require(0 < self.confidence < 1, f"{w}.confidence", self.confidence, "must lie in (0, 1)")
        require(
            0.5 < self.reference_rho_beta < 1,
            f"{w}.reference_rho_beta",
            self.reference_rho_beta,
            "must lie in (0.5, 1)",
        )
        require(self.candidate_trials >= 0, f"{w}.candidate_trials", self.candidate_trials, "must be >= 0")
        require(
            self.chunk_size is None or self.chunk_size >= 1,
            f"{w}.chunk_size",
            self.chunk_size,
            "must be null or at least 1",
        )

    def learning_rate_for(self, dataset: str) -> float:
        own = self.models.get(dataset)
        return own.learning_rate if own is not None and own.learning_rate is not None else self.learning_rate

    def trials_for(self, dataset: str) -> int:
        own = self.models.get(dataset)
        return own.trials if own is not None and own.trials is not None else self.trials

    def model_for(self, prepared: PreparedData) -> models.Model:
        if prepared.name not in self.models:
            raise ParamsError(f"params: 'identifiability.models' has no entry for dataset '{prepared.name}'")
        return models.model_for_dataset(
            prepared.name, prepared.input_shape, prepared.num_classes, self.models[prepared.name].hidden
        )


# The three empirical ε′ of Bernau §5.3, by the column suffix they are written under.
EPSILON_PRIME_SOURCES = {"ls": "local sensitivities", "belief": "the maximum belief", "adv": "Adv_DI"}


def config_from_params(params: dict[str, Any]) -> IdentifiabilityConfig:
    """Validate and build the ``identifiability`` section."""
    return from_mapping(IdentifiabilityConfig, section(params, "identifiability"), "identifiability")


@dataclass(frozen=True)
class Setting:
    """One grid point: target belief bound, sensitivity kind and neighbourhood."""

    rho_beta: float
    sensitivity: Sensitivity
    neighbours: Neighbours

    @property
    def key(self) -> str:
        return f"{self.sensitivity}-{self.neighbours}"

    @property
    def file(self) -> str:
        return f"rb{self.rho_beta:g}_{self.key}"

    @property
    def rho_key(self) -> str:
        return f"rho_beta_{self.rho_beta:g}"


def settings(config: IdentifiabilityConfig) -> list[Setting]:
    return [
        Setting(rb, s, nb) for rb in config.rho_beta for s in config.sensitivities for nb in config.neighbours
    ]


@dataclass(frozen=True)
class _Population:
    """The shared example set of all trials: D followed by the needed replacement records."""

    X: np.ndarray
    y: np.ndarray
    rows: dict[int, int]  # global index -> row
    n: int  # |D|; rows 0..n-1 are D


def _population(prepared: PreparedData, sens: SensitivityResult) -> _Population:
    train = [int(i) for i in prepared.train_idx]
    extra: list[int] = []
    for pair in [sens.bounded, *sens.bounded.top, *sens.bounded.bottom]:
        r = int(pair.replacement_index)
        if r not in extra and r not in train:
            extra.append(r)
    order = train + extra
    rows = {g: i for i, g in enumerate(order)}
    for idx in [sens.unbounded.index, sens.bounded.index]:
        if idx not in rows or rows[idx] >= len(train):
            raise ValueError(
                f"{prepared.name}: sensitivity record {idx} is not in D (train_idx); "
                "re-run the sensitivity stage for this prepared data"
            )
    return _Population(prepared.X[order], prepared.y[order], rows, len(train))


def _neighbour_design(
    pop: _Population, sens: SensitivityResult, neighbours: Neighbours
) -> tuple[tuple[int, ...], tuple[float, ...], np.ndarray, np.ndarray]:
    """Tracked rows, difference weights and the masks of D and D′ over the shared rows."""
    N = len(pop.X)
    d_mask = np.zeros(N, bool)
    d_mask[: pop.n] = True
    d_prime = d_mask.copy()
    if neighbours == "unbounded":
        x = pop.rows[sens.unbounded.index]
        d_prime[x] = False
        return (x,), (1.0,), d_mask, d_prime
    x, xp = pop.rows[sens.bounded.index], pop.rows[sens.bounded.replacement_index]
    d_prime[x] = False
    d_prime[xp] = True
    return (x, xp), (1.0, -1.0), d_mask, d_prime


def _delta(config: IdentifiabilityConfig, n: int) -> float:
    return config.delta if config.delta is not None else 1.0 / n


@functools.lru_cache(maxsize=64)
def noise_multiplier_for(rho_beta: float, delta: float, steps: int) -> tuple[float, float]:
    """(ε, z): ε from ρβ (Eq. 10), z calibrated under RDP with q = 1 and ``steps`` steps."""
    eps = epsilon_from_rho_beta(rho_beta)
    return eps, calibrate_noise_multiplier(eps, delta, 1.0, steps, "rdp")


def rho_alpha_rdp_for(noise_multiplier: float, steps: int, delta: float) -> float:
    """ρα under RDP composition (Bernau §4.4): 2Φ(√(ε_RDP/(2α))) − 1 at the accountant's optimal order α.

    For k full-batch Gaussian steps ε_RDP(α) = α·k/(2z²), so this equals 2Φ(√k/(2z)) − 1, the
    advantage A_DI,Gau attains with local sensitivity. Thm. 2's ρα (classic calibration) can be
    smaller than this for RDP-calibrated noise, so the audit reports both.
    """
    _, order = rdp_epsilon_and_order(noise_multiplier, 1.0, steps, delta)
    return rho_alpha_from_rdp(order * steps / (2.0 * noise_multiplier**2), order)


def run_train(config: IdentifiabilityConfig, audit: Audit, out_dir: Path) -> None:
    """Train ``trials`` models per grid setting and the Fig. 4 candidate runs; write npz per setting."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    prepared = PreparedData.load(audit.prepared_path)
    sens = SensitivityResult.load(audit.sensitivity_path)
    pop = _population(prepared, sens)
    model = config.model_for(prepared)
    delta = _delta(config, pop.n)
    k = config.epochs
    grid = settings(config)
    T = config.trials_for(prepared.name)
    # One training call per (sensitivity, neighbours): its ρβ values differ only in the per-trial
    # noise multiplier, so they train together as one larger batch of trials.
    for gi, (sensitivity, neighbours) in enumerate(
        dict.fromkeys((st.sensitivity, st.neighbours) for st in grid)
    ):
        group = [
            (si, st)
            for si, st in enumerate(grid)
            if (st.sensitivity, st.neighbours) == (sensitivity, neighbours)
        ]
        rows, weights, d_mask, d_prime = _neighbour_design(pop, sens, neighbours)
        log.info("%s: %s-%s, %d trials for each of rho_beta %s", audit.name, sensitivity, neighbours, T,
                 [st.rho_beta for _, st in group])  # fmt: skip
        calibrated = [noise_multiplier_for(st.rho_beta, delta, k) for _, st in group]
        worlds = [np.random.default_rng([config.seed, si, 17]).integers(0, 2, T) for si, _ in group]
        world = np.concatenate(worlds)
        mask = np.where(world[:, None] == 1, d_mask[None, :], d_prime[None, :])
        cfg = dpsgd.DPSGDConfig(
            clip_norm=config.clip_norm,
            noise_multiplier=np.repeat([z for _, z in calibrated], T),
            learning_rate=config.learning_rate_for(prepared.name),
            steps=k,
            noise_scale="local" if sensitivity == "local" else "global",
            sensitivity_factor=2.0 if neighbours == "bounded" else 1.0,
            normalizer=float(pop.n),
        )
        res = dpsgd.train_trials(
            model,
            pop.X,
            pop.y,
            mask,
            cfg,
            seed=config.seed * 1000 + gi,
            tracked=dpsgd.TrackedRecords(rows, weights),
            observers={"di": di.di_observer()},
            chunk_size=config.chunk_size,
            desc=f"train {audit.name} {sensitivity}-{neighbours}",
        )
        for j, ((_, st), (eps, z)) in enumerate(zip(group, calibrated, strict=True)):
            part = slice(j * T, (j + 1) * T)
            arrays: dict[str, Any] = {
                "world": world[part].astype(np.int8),
                "dot": res.records["di.dot"][part],
                "dd": res.records["di.dd"][part],
                "sigma": res.records["di.sigma"][part],
                "epsilon": eps,
                "noise_multiplier": z,
                "delta": delta,
                "tracked_rows": np.asarray(rows),
                "member_mask": mask[part],
            }
            arrays.update({f"param_{i}": p[part] for i, p in enumerate(res.params)})
            write_npz(out_dir / f"{st.file}.npz", arrays)
    _train_candidates(config, audit, model, pop, sens, delta, out_dir)
    write_json(
        out_dir / "population.json",
        {
            "n": pop.n,
            "rows": {str(g): r for g, r in pop.rows.items()},
            "dataset": prepared.name,
            "measure": sens.measure,
        },
    )


def _train_candidates(
    config: IdentifiabilityConfig,
    audit: Audit,
    model: models.Model,
    pop: _Population,
    sens: SensitivityResult,
    delta: float,
    out_dir: Path,
) -> None:
    """Bernau Fig. 4: LS_i over training on D for the top/bottom dataset-sensitivity candidates.

    All candidates run in one call: trial t tracks its own candidate through per-trial difference
    weights, with local-sensitivity noise at ``reference_rho_beta``.
    """
    if config.candidate_trials == 0:
        return
    cands: list[tuple[str, str, int, tuple[int, ...]]] = []
    for end in ("top", "bottom"):
        for rank, c in enumerate(getattr(sens.unbounded, end), start=1):
            cands.append(("unbounded", end, rank, (c.index,)))
        for rank, p in enumerate(getattr(sens.bounded, end), start=1):
            cands.append(("bounded", end, rank, (p.index, p.replacement_index)))
    cands = [c for c in cands if all(g in pop.rows for g in c[3])]
    if not cands:
        return
    tracked_globals = sorted({g for c in cands for g in c[3]})
    col = {g: i for i, g in enumerate(tracked_globals)}
    per = config.candidate_trials
    weights = np.zeros((len(cands) * per, len(tracked_globals)), np.float32)
    for ci, (_, _, _, idx) in enumerate(cands):
        weights[ci * per : (ci + 1) * per, col[idx[0]]] = 1.0
        if len(idx) == 2:
            weights[ci * per : (ci + 1) * per, col[idx[1]]] = -1.0
    mask = np.zeros((len(weights), len(pop.X)), bool)
    mask[:, : pop.n] = True
    _, z = noise_multiplier_for(config.reference_rho_beta, delta, config.epochs)
    cfg = dpsgd.DPSGDConfig(
        clip_norm=config.clip_norm,
        noise_multiplier=z,
        learning_rate=config.learning_rate_for(audit.dataset),
        steps=config.epochs,
        noise_scale="local",
        normalizer=float(pop.n),
    )
    res = dpsgd.train_trials(
        model,
        pop.X,
        pop.y,
        mask,
        cfg,
        seed=config.seed * 1000 + 999,
        tracked=dpsgd.TrackedRecords(tuple(pop.rows[g] for g in tracked_globals), weights),
        observers={"di": di.di_observer()},
        chunk_size=config.chunk_size,
        desc=f"train {audit.name} candidates",
    )
    write_npz(
        out_dir / "candidates.npz",
        {
            "ls": np.sqrt(res.records["di.dd"]),
            "neighbours": np.repeat([c[0] for c in cands], per),
            "end": np.repeat([c[1] for c in cands], per),
            "rank": np.repeat([c[2] for c in cands], per),
            "index": np.repeat([c[3][0] for c in cands], per),
        },
    )


def _load_params(f: Any) -> list[np.ndarray]:
    out = []
    while f"param_{len(out)}" in f:
        out.append(f[f"param_{len(out)}"])
    return out


def run_losses(config: IdentifiabilityConfig, audit: Audit, out_path: Path) -> None:
    """Per setting and trial: loss of the tracked records, mean training loss, test accuracy."""
    prepared = PreparedData.load(audit.prepared_path)
    model = config.model_for(prepared)
    pop_info = read_json(audit.train_dir / "population.json")
    order = sorted(pop_info["rows"].items(), key=lambda kv: kv[1])
    X, y = prepared.X[[int(g) for g, _ in order]], prepared.y[[int(g) for g, _ in order]]
    Xe, ye = prepared.split("eval")
    out: dict[str, np.ndarray] = {}
    for st in settings(config):
        with np.load(audit.train_dir / f"{st.file}.npz") as f:
            params, rows, mask = _load_params(f), f["tracked_rows"], f["member_mask"]
        losses = model.losses(params, X, y)  # [T, N]
        out[f"{st.file}__record_loss"] = losses[:, rows]
        out[f"{st.file}__train_loss"] = (losses * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1)
        probs = model.predict_proba(params, Xe)
        out[f"{st.file}__test_accuracy"] = (probs.argmax(axis=2) == ye[None, :]).mean(axis=1)
    write_npz(out_path, out)


def run_attack(config: IdentifiabilityConfig, audit: Audit, out_dir: Path) -> None:
    """A_DI,Gau (Algorithm 1) and the Yeom MI adversary per setting; per-trial outputs to npz."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with np.load(audit.losses_path) as lf:
        losses = {k: lf[k] for k in lf.files}
    for st in settings(config):
        with np.load(audit.train_dir / f"{st.file}.npz") as f:
            world, dot, dd, sigma = f["world"], f["dot"], f["dd"], f["sigma"]
        outcome = di.run_di(dot, dd, sigma, world, st.rho_beta, config.confidence)
        # MI on x̂ (first tracked row): a member exactly in world D.
        mi_guess = di.yeom_guess(losses[f"{st.file}__record_loss"][:, 0], losses[f"{st.file}__train_loss"])
        write_npz(
            out_dir / f"{st.file}.npz",
            {
                "world": world,
                "final_log_odds_true": outcome.final_true_log_odds,
                "di_guess": outcome.guess_d.astype(np.int8),
                "mi_guess": mi_guess.astype(np.int8),
            },
        )


def _num(x: float) -> float:
    """Finite JSON number (±inf → ±1e308) so every metrics leaf stays a number."""
    x = float(x)
    if math.isnan(x):
        raise ValueError("NaN metric")
    return max(-1e308, min(1e308, x))


@functools.lru_cache(maxsize=64)
def upper_bounds(noise_multiplier: float, steps: int, delta: float) -> dict[str, float]:
    """Every accountant's ε for k full-batch steps (q = 1) at this noise, for the summary table."""
    return {name: _num(value) for name, value in all_epsilons(noise_multiplier, 1.0, steps, delta).items()}


def run_bounds(
    config: IdentifiabilityConfig, audit: Audit, metrics_path: Path, plots_dir: Path, section_path: Path
) -> None:
    """Metrics per setting, plot CSVs (beliefs, ε′ vs ε, LS/GS over epochs, candidates) and the section."""
    plots_dir = Path(plots_dir)
    plots_dir.mkdir(parents=True, exist_ok=True)
    with np.load(audit.losses_path) as lf:
        losses = {k: lf[k] for k in lf.files}
    metrics: dict[str, dict[str, dict[str, float]]] = {}
    belief_rows: list[pd.DataFrame] = []
    eps_rows: list[dict[str, Any]] = []
    step_rows: list[pd.DataFrame] = []
    summary: list[SummaryRow] = []
    k = config.epochs
    for st in settings(config):
        with np.load(audit.train_dir / f"{st.file}.npz") as f:
            dd, sigma = f["dd"], f["sigma"]
            eps, z, delta = float(f["epsilon"]), float(f["noise_multiplier"]), float(f["delta"])
        with np.load(audit.attack_dir / f"{st.file}.npz") as a:
            world, truth = a["world"], a["final_log_odds_true"]
            adv = di.advantage_of_guesses(a["di_guess"], world, config.confidence)
            mi = di.advantage_of_guesses(a["mi_guess"], world, config.confidence)
        n = len(world)
        eps_ls, _ = di.epsilon_from_sensitivities(sigma, dd, delta)
        eps_belief = di.epsilon_from_beliefs(truth)
        eps_adv = di.epsilon_from_advantage(adv.advantage, delta)
        rho_alpha = rho_alpha_from_epsilon(eps, delta)
        rho_alpha_rdp = rho_alpha_rdp_for(z, k, delta)
        accuracy = float(np.mean(losses[f"{st.file}__test_accuracy"]))
        ls = np.sqrt(dd)
        # A valid lower confidence bound on ε from the adversary's scores (log-odds of D), with the
        # threshold chosen on one half of the trials and counted on the other (Nasr Eqs. 4–5).
        # (Inverting Thm. 2 at the lower end of Adv's interval is not valid: with RDP-calibrated
        # noise A_DI,Gau's advantage exceeds Thm. 2's ρα.)
        log_odds_d = np.clip(np.where(world == 1, truth, -truth), -1e300, 1e300)
        lower = epsilon_lower_from_scores(
            log_odds_d[world == 1], log_odds_d[world == 0], delta, config.confidence, "split", config.seed
        )
        eps_low = lower.epsilon_lower
        metrics.setdefault(st.rho_key, {})[st.key] = {
            "epsilon": _num(eps),
            "delta": _num(delta),
            "noise_multiplier": _num(z),
            "rho_beta": st.rho_beta,
            "rho_alpha": _num(rho_alpha),
            "rho_alpha_rdp": _num(rho_alpha_rdp),
            "adv_di": adv.advantage,
            "adv_di_low": adv.low,
            "adv_di_high": adv.high,
            "adv_expected_local": di.expected_advantage_local(z, k),
            "adv_mi": mi.advantage,
            "delta_prime": di.delta_prime(truth, st.rho_beta),
            "epsilon_lower_di": _num(eps_low),
            "delta_prime_expected_local": di.expected_delta_prime_local(z, k, eps),
            "epsilon_prime_ls": _num(eps_ls),
            "epsilon_prime_belief": _num(eps_belief),
            "epsilon_prime_adv": _num(eps_adv),
            "epsilon_rdp": upper_bounds(z, k, delta)["rdp"],
            "mean_local_sensitivity": float(ls.mean()),
            "test_accuracy": accuracy,
            "trials": n,
        }
        setting = f"{st.sensitivity}-{st.neighbours}"
        belief_rows.append(
            pd.DataFrame(
                {"rho_beta": st.rho_beta, "setting": setting, "belief": di.beliefs_from_log_odds(truth)}
            )
        )
        eps_rows.append(
            {
                "epsilon": eps,
                "rho_beta": st.rho_beta,
                "setting": setting,
                "epsilon_prime_ls": eps_ls,
                "epsilon_prime_belief": eps_belief,
                "epsilon_prime_adv": eps_adv,
                "adv_di": adv.advantage,
                "adv_mi": mi.advantage,
                "rho_alpha": rho_alpha,
                "rho_alpha_rdp": rho_alpha_rdp,
            }
        )
        if math.isclose(st.rho_beta, config.reference_rho_beta):
            gs = config.clip_norm * (2.0 if st.neighbours == "bounded" else 1.0)
            step_rows.append(
                pd.DataFrame(
                    {
                        "epoch": np.arange(1, k + 1),
                        "setting": setting,
                        "ls_mean": ls.mean(axis=0),
                        "ls_p05": np.quantile(ls, 0.05, axis=0),
                        "ls_p95": np.quantile(ls, 0.95, axis=0),
                        "gs": gs,
                    }
                )
            )
        summary.append(
            SummaryRow(
                setting=f"ρβ={st.rho_beta:g} {setting}",
                epsilon_upper=upper_bounds(z, k, delta),
                epsilon_lower=_num(eps_low),
                epsilon_lower_estimator=f"DI beliefs, split threshold, {config.confidence:.0%} CP",
                rho_beta=st.rho_beta,
                rho_alpha=_num(rho_alpha),
                epsilon_star=None,
                utility_name="test accuracy",
                utility=accuracy,
            )
        )
    write_json(metrics_path, metrics)
    pd.concat(belief_rows).to_csv(plots_dir / "beliefs.csv", index=False)
    pd.DataFrame(eps_rows).replace([np.inf], 1e308).to_csv(plots_dir / "epsilon.csv", index=False)
    if step_rows:
        pd.concat(step_rows).to_csv(plots_dir / "sensitivity_steps.csv", index=False)
    cand_path = audit.train_dir / "candidates.npz"
    if cand_path.exists():
        with np.load(cand_path) as c:
            labels = [
                f"{nb} {end} {r} (#{i})"
                for nb, end, r, i in zip(c["neighbours"], c["end"], c["rank"], c["index"], strict=True)
            ]
            ls = c["ls"]
            pd.DataFrame(
                {
                    "candidate": np.repeat(labels, ls.shape[1]),
                    "neighbours": np.repeat(c["neighbours"], ls.shape[1]),
                    "ls": ls.ravel(),
                }
            ).to_csv(plots_dir / "candidates.csv", index=False)
    _section(config, audit, metrics, summary, cand_path.exists(), bool(step_rows)).save(section_path)


def _section(
    config: IdentifiabilityConfig,
    audit: Audit,
    metrics: dict[str, Any],
    summary: list[SummaryRow],
    candidates: bool,
    steps: bool,
) -> ReportSection:
    ref = f"rho_beta_{config.reference_rho_beta:g}"
    ref_metrics = metrics.get(ref) or next(iter(metrics.values()))
    rows = []
    for sens in config.sensitivities:
        for nb in config.neighbours:
            m = ref_metrics[f"{sens}-{nb}"]
            rows.append(
                [
                    sens,
                    nb,
                    round(m["adv_di"], 3),
                    f"[{m['adv_di_low']:.2f}, {m['adv_di_high']:.2f}]",
                    round(m["adv_expected_local"], 3),
                    round(m["delta_prime"], 4),
                    round(m["delta_prime_expected_local"], 4),
                    f"{m['delta']:.2g}",
                    round(m["adv_mi"], 3),
                ]
            )
    table2 = TableSpec(
        id="bernau-table-2",
        title=f"A_DI,Gau at ρβ = {config.reference_rho_beta:g} (cf. Bernau et al. Table 2)",
        columns=[
            "sensitivity",
            "neighbours",
            "Adv_DI",
            f"{config.confidence:.0%} CI",
            "2Φ(√k/2z)−1",
            "δ′",
            "δ′ expected (LS)",
            "δ",
            "Adv_MI",
        ],
        rows=rows,
        caption=(
            "Adv_DI from final beliefs; δ′ = share of trials whose belief exceeds ρβ. The expected "
            "columns are the exact values for local-sensitivity noise (Gaussian privacy loss with "
            "μ = √k/z); global sensitivity adds more noise when LS_i < Δf and should not exceed them."
        ),
    )
    params_rows = []
    for rb in config.rho_beta:
        m = next(iter(metrics[f"rho_beta_{rb:g}"].values()))
        params_rows.append(
            [
                rb,
                f"{m['delta']:.2g}",
                round(m["epsilon"], 3),
                round(m["rho_alpha"], 3),
                round(m["noise_multiplier"], 3),
            ]
        )
    params_table = TableSpec(
        id="bernau-parameters",
        title="Privacy parameters per target belief bound",
        columns=["ρβ", "δ", "ε", "ρα", "z (RDP, q=1)"],
        rows=params_rows,
    )
    rel = f"plots/{audit.name}"
    figures = [
        FigureSpec(
            id=f"{audit.name}-beliefs",
            title="Final posterior beliefs in the true dataset",
            kind="histogram",
            data=f"{rel}/beliefs.csv",
            x="belief",
            y=[],
            x_label="β_k",
            y_label="trials",
            group="setting",
            facet="rho_beta",
        ),
        *(
            FigureSpec(
                id=f"{audit.name}-eps-{name}",
                title=f"ε′ from {source} vs target ε",
                kind="line",
                data=f"{rel}/epsilon.csv",
                x="epsilon",
                y=[f"epsilon_prime_{name}"],
                x_label="target ε",
                y_label="ε′",
                group="setting",
                diagonal=True,
            )
            for name, source in EPSILON_PRIME_SOURCES.items()
        ),
        FigureSpec(
            id=f"{audit.name}-adv",
            title="Adv of A_DI,Gau and of loss-threshold MI vs ρα",
            kind="line",
            data=f"{rel}/epsilon.csv",
            x="epsilon",
            y=["adv_di", "adv_mi", "rho_alpha", "rho_alpha_rdp"],
            x_label="target ε",
            y_label="advantage",
            facet="setting",
        ),
    ]
    if steps:
        figures.append(
            FigureSpec(
                id=f"{audit.name}-ls-gs",
                title=f"Local vs global sensitivity over epochs (ρβ = {config.reference_rho_beta:g})",
                kind="line",
                data=f"{rel}/sensitivity_steps.csv",
                x="epoch",
                y=["ls_mean", "ls_p05", "ls_p95", "gs"],
                x_label="epoch",
                y_label="sensitivity",
                facet="setting",
            )
        )
    if candidates:
        figures.append(
            FigureSpec(
                id=f"{audit.name}-candidates",
                title="LS_i for the top/bottom dataset-sensitivity candidates (cf. Bernau Fig. 4)",
                kind="histogram",
                data=f"{rel}/candidates.csv",
                x="ls",
                y=[],
                x_label="LS_i",
                y_label="count",
                group="candidate",
                facet="neighbours",
            )
        )
    headline_key = f"ρβ={config.reference_rho_beta:g} local-bounded"
    headline = next((r for r in summary if r.setting == headline_key), summary[0])
    return ReportSection(
        dataset=audit.dataset,
        experiment="identifiability",
        title=f"Identifiability audit — {audit.dataset}",
        description=(
            "Full-batch DP-SGD on D or a neighbour D′ chosen by dataset sensitivity; noise from the "
            "target belief bound ρβ (ε = ln(ρβ/(1−ρβ)), z by RDP). The DI adversary of Bernau et al. "
            "(Algorithm 1) observes every noisy gradient; Adv_DI should match 2Φ(√k/2z)−1 with local "
            "sensitivity and fall below it with global sensitivity."
        ),
        headline=headline,
        rows=summary,
        tables=[table2, params_table],
        figures=figures,
    )
