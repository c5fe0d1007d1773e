"""Train stage of the canaries experiment: M models per defence, each in one trials-at-once call.

The audit set (:func:`~dpaudit.experiments.canaries.design.build_audit_set`) fixes which canaries
each of the M models trains on; every defence trains the same M member masks (Aerni et al. §3,
:data:`dpaudit.references.AERNI`). The undefended models run non-private SGD (no clipping, no
noise); each DP-SGD setting (Abadi et al. Algorithm 1, :data:`dpaudit.references.ABADI`) clips to C
and adds noise z·C with Poisson sampling at rate q, so its mechanism is the Poisson-subsampled
Gaussian composed T = ⌈epochs / q⌉ times that the manifest records. The label-only heuristic
releases the undefended models' top-1 labels and trains nothing of its own; the published heuristic
defences (RelaxLoss, SELENA: :mod:`dpaudit.training.heuristics`) train their own M models on the
same masks.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from pathlib import Path

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.data.worlds import setting_seed
from dpaudit.experiments.base import Mechanism, TrainManifest
from dpaudit.experiments.canaries.config import CANARY_TYPES, CanariesConfig, TrainParams
from dpaudit.experiments.canaries.design import DESIGN_FILE, build_audit_set, dataset_seed, defences_for
from dpaudit.io import open_npz, write_npz
from dpaudit.layout import Audit
from dpaudit.training.modelling import build_model
from dpaudit.training.models import Model

log = logging.getLogger(__name__)

#: Layer widths when the dataset entry names none: digits' MLP 64-128-10 of the spec.
DEFAULT_HIDDEN = {"digits": (128,)}


def steps_for(epochs: float, sampling_rate: float) -> int:
    """Steps whose expected batches (q·n records each) add up to ``epochs`` passes over the data."""
    return max(1, math.ceil(epochs / sampling_rate - 1e-9))


def weights_file(group: str) -> str:
    return f"weights-{group}.npz"


def stacked_weights(params: list[np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays of a weights file: ``p0, p1, …`` (trial axis first), float32."""
    return {f"p{i}": np.asarray(p, np.float32) for i, p in enumerate(params)}


def load_weights(path: Path) -> list[np.ndarray]:
    """Stacked final weights ``p0, p1, …`` (trial axis first) of one trained group."""
    with open_npz(path) as f:
        count = sum(1 for k in f.files if k.startswith("p") and k[1:].isdigit())
        return [f[f"p{i}"] for i in range(count)]


def train_heuristic(
    kind: str, tp: TrainParams, model: Model, X: np.ndarray, y: np.ndarray, mask: np.ndarray,
    seed: int, desc: str,
) -> list[np.ndarray]:  # fmt: skip
    """The released models of one published heuristic defence, trained on the M member masks."""
    from dpaudit.training.heuristics import (
        HampConfig,
        RelaxLossConfig,
        SelenaConfig,
        train_hamp,
        train_relaxloss,
        train_selena,
    )

    config = {"hamp": HampConfig, "relaxloss": RelaxLossConfig, "selena": SelenaConfig}[kind]
    cfg = config(**dataclasses.asdict(getattr(tp, kind)), sampling_rate=tp.sampling_rate)
    trainer = {"hamp": train_hamp, "relaxloss": train_relaxloss, "selena": train_selena}[kind]
    return trainer(model, X, y, mask, cfg, seed=seed, desc=desc)


def heuristic_facts(tp: TrainParams) -> dict[str, dict[str, float]]:
    """The settings of the heuristic defences trained, for the manifest and the report."""
    return {h: dataclasses.asdict(getattr(tp, h)) for h in tp.heuristics}


def train(config: CanariesConfig, audit: Audit, out_dir: Path) -> TrainManifest:
    """Build the audit set, train M models per defence, write weights and the design."""
    from dpaudit.training.dpsgd import DPSGDConfig, train_trials

    started = time.perf_counter()
    tp = config.train
    settings = config.settings_for(audit.dataset)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    prepared = PreparedData.load(audit.prepared_path)
    seed = dataset_seed(tp.seed, audit.dataset)
    candidates = np.concatenate([prepared.train_idx, prepared.pool_idx])
    audit_set = build_audit_set(
        prepared.X, prepared.y, candidates, prepared.num_classes, settings, tp.models, seed
    )
    audit_set.save(out_dir / DESIGN_FILE)
    X, y, mask = audit_set.training_arrays()
    hidden = settings.hidden if settings.hidden is not None else DEFAULT_HIDDEN.get(audit.dataset)
    model = build_model(prepared.name, prepared.input_shape, prepared.num_classes, hidden)
    steps = steps_for(tp.epochs, tp.sampling_rate)
    defences = defences_for(list(tp.noise_multipliers), tp.utility_first_noise, tp.heuristics)
    dp = [d for d in defences if d.spec.private]
    seconds: dict[str, float] = {}

    t0 = time.perf_counter()
    cfg = DPSGDConfig(None, 0.0, tp.learning_rate, steps, tp.sampling_rate)
    result = train_trials(model, X, y, mask, cfg, seed=seed, desc=f"train {audit.name} undefended")
    stacked = stacked_weights(result.params)
    baseline = next(d for d in defences if d.spec.undefended)  # the undefended models' weights
    write_npz(out_dir / weights_file(baseline.weights), stacked)
    seconds["undefended"] = time.perf_counter() - t0
    if dp:
        t0 = time.perf_counter()
        # One call per defence, seeded by its noise multiplier: a defence's models do not depend on
        # which other defences the list holds.
        for d in dp:
            z = float(d.noise_multiplier or 0.0)
            cfg = DPSGDConfig(tp.clip_norm, z, tp.dp_learning_rate, steps, tp.sampling_rate)
            result = train_trials(model, X, y, mask, cfg, seed=setting_seed(seed, "canaries-dpsgd", z),
                                  desc=f"train {audit.name} {d.name}")  # fmt: skip
            stacked = stacked_weights(result.params)
            write_npz(out_dir / weights_file(d.weights), stacked)
        seconds["dpsgd"] = time.perf_counter() - t0
    for d in (d for d in defences if d.spec.heuristic):
        t0 = time.perf_counter()
        h_seed = setting_seed(seed, "canaries-heuristic", d.kind)
        params = train_heuristic(d.kind, tp, model, X, y, mask, h_seed, f"train {audit.name} {d.name}")
        write_npz(out_dir / weights_file(d.weights), stacked_weights(params))
        seconds[d.name] = time.perf_counter() - t0
    trained = tp.models * (1 + len(dp) + sum(d.spec.heuristic for d in defences))
    log.info("%s: trained %d models in %.1fs", audit.name, trained, sum(seconds.values()))

    mechanisms: dict[str, Mechanism] = {}
    for d in defences:
        if d.spec.private:
            z = float(d.noise_multiplier or 0.0)
            mechanisms[d.name] = Mechanism.dpsgd(z, tp.sampling_rate, steps, tp.clip_norm)
        else:
            mechanisms[d.name] = Mechanism.non_private(steps, tp.sampling_rate)
    counts = settings.canaries.as_dict()
    return TrainManifest(
        experiment="canaries",
        dataset=audit.dataset,
        delta=tp.delta,
        sizes={
            "models": tp.models,
            "canaries": int(sum(counts.values())),
            "base": settings.base,
            "training_rows": int(len(X)),
            **{f"canaries_{t}": counts[t] for t in CANARY_TYPES},
        },
        seeds={"seed": tp.seed, "design_seed": seed},
        mechanisms=mechanisms,
        facts={
            "num_classes": prepared.num_classes,
            "hidden": list(hidden) if hidden is not None else None,
            "steps": steps,
            "epochs": tp.epochs,
            "sampling_rate": tp.sampling_rate,
            "clip_norm": tp.clip_norm,
            "learning_rate": tp.learning_rate,
            "dp_learning_rate": tp.dp_learning_rate,
            "ood": settings.ood,
            "duplicate_copies": settings.duplicate_copies,
            "canary_types": list(CANARY_TYPES),
            "defences": [
                {
                    "name": d.name,
                    "kind": d.kind,
                    "weights": d.weights,
                    "label": d.label,
                    "noise_multiplier": d.noise_multiplier,
                }
                for d in defences
            ],
            "heuristics": heuristic_facts(tp),
            "models_trained": trained,
            "train_seconds": {k: round(v, 3) for k, v in seconds.items()},
        },
        seconds=round(time.perf_counter() - started, 3),
    )
