"""Tune RelaxLoss and SELENA on digits to the utility target (test accuracy ≥ 0.93), then time them.

Each setting trains ``--models`` models on the same 1000 base records (drawn, as the canaries audit
draws them, from ``train_idx ∪ pool_idx``: digits' ``train_idx`` alone holds only 100 rows) with the
digits MLP 64-128-10, and reports on ``eval_idx``: mean test accuracy, mean training and test loss,
their gap (test − train, the signal loss-based membership inference reads) and wall time.

Recommended setting per defence: among those reaching the target, RelaxLoss's largest α (the most
private: the training loss is held highest; ties: the more accurate), SELENA's smallest loss gap (gaps within
:data:`GAP_TOLERANCE` tie; then the fastest). The last table times 64 targets at the recommended
settings on an audit-sized design (1000 base rows in every model plus the remaining ~300 candidates,
each in half of the models: ~1300 rows, as in the canaries audit) and gives their mean test accuracy.

RelaxLoss ends on the phase of its last epoch: with an odd number of epochs the last epoch is even, a
gradient-ascent epoch, which leaves the model at a raised loss (the 16-epoch schedule avoids this).

Run: ``DPAUDIT_PROGRESS=0 python benchmarks/tune_heuristics.py`` (about 2 minutes on 2 CPU cores).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.training.heuristics import (
    RelaxLossConfig,
    SelenaConfig,
    cross_entropy,
    steps_for,
    train_minibatch,
    train_relaxloss,
    train_selena,
)
from dpaudit.training.modelling import build_model
from dpaudit.training.models import Model

TARGET_ACCURACY = 0.93
ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
SPLITS = ((8, 3), (10, 4), (16, 6), (25, 10))
SCHEDULES = ((1.0, 30.0), (0.5, 30.0), (1.0, 60.0), (0.5, 60.0), (1.0, 16.0))  # (learning rate, epochs)
#: SELENA loss gaps closer than this to the smallest count as equal (then the fastest setting wins).
GAP_TOLERANCE = 0.005
Q = 0.1  # sampling rate, as the canaries audit


@dataclass(frozen=True)
class Row:
    defence: str
    setting: str
    accuracy: float
    train_loss: float
    test_loss: float
    seconds: float
    config: RelaxLossConfig | SelenaConfig | None = None

    @property
    def gap(self) -> float:
        return self.test_loss - self.train_loss

    @property
    def privacy(self) -> float:
        """Larger is more private: RelaxLoss's α, else the negative loss gap."""
        return self.config.alpha if isinstance(self.config, RelaxLossConfig) else -self.gap


def evaluate(model: Model, params: list[np.ndarray], data: dict[str, np.ndarray]) -> tuple[float, ...]:
    """Mean test accuracy, training loss and test loss of the models."""
    probs = model.predict_proba(params, data["Xe"])
    accuracy = float((probs.argmax(-1) == data["ye"]).mean())
    test_loss = float(-np.log(np.clip(probs[:, np.arange(len(data["ye"])), data["ye"]], 1e-30, None)).mean())
    return accuracy, float(model.losses(params, data["X"], data["y"]).mean()), test_loss


def timed(fn: Callable[[], list[np.ndarray]]) -> tuple[list[np.ndarray], float]:
    started = time.perf_counter()
    params = fn()
    return params, time.perf_counter() - started


def run_grid(model: Model, data: dict[str, np.ndarray], models: int, quick: bool) -> list[Row]:
    X, y = data["X"], data["y"]
    mask = np.ones((models, len(X)), bool)
    rows: list[Row] = []

    def add(defence: str, setting: str, params: list[np.ndarray], seconds: float,
            cfg: RelaxLossConfig | SelenaConfig | None) -> None:  # fmt: skip
        acc, train_loss, test_loss = evaluate(model, params, data)
        row = Row(defence, setting, acc, train_loss, test_loss, seconds, cfg)
        rows.append(row)
        print(f"  {defence:9s} {setting:32s} acc {acc:.3f} gap {row.gap:.3f} {seconds:5.1f}s", flush=True)

    params, s = timed(lambda: train_minibatch(
        model, X, y, mask, cross_entropy, learning_rate=1.0, steps=steps_for(30, Q), sampling_rate=Q,
        seed=0, desc="undefended"))  # fmt: skip
    add("none", "lr 1.0, 30 epochs", params, s, None)
    schedules = SCHEDULES[:1] if quick else SCHEDULES
    for lr, epochs in schedules:
        for alpha in ALPHAS:
            cfg = RelaxLossConfig(alpha=alpha, learning_rate=lr, epochs=epochs, sampling_rate=Q)
            params, s = timed(lambda cfg=cfg: train_relaxloss(model, X, y, mask, cfg, seed=0))
            add("relaxloss", f"α {alpha}, lr {lr}, {epochs:g} epochs", params, s, cfg)
    for lr, epochs in schedules:
        for K, L in SPLITS[:2] if quick else SPLITS:
            cfg = SelenaConfig(submodels=K, excluded=L, learning_rate=lr, epochs=epochs, sampling_rate=Q,
                               distill_epochs=epochs)  # fmt: skip
            params, s = timed(lambda cfg=cfg: train_selena(model, X, y, mask, cfg, seed=0))
            add("selena", f"K {K}, L {L}, lr {lr}, {epochs:g} epochs", params, s, cfg)
    return rows


def recommend(rows: list[Row], defence: str) -> Row | None:
    """The most private setting of ``defence`` that reaches the target: RelaxLoss's largest α (ties: the
    higher accuracy); SELENA's smallest loss gap, gaps within :data:`GAP_TOLERANCE` counting as equal
    (4 models per setting do not resolve finer differences), then the fastest."""
    ok = [r for r in rows if r.defence == defence and r.accuracy >= TARGET_ACCURACY]
    if not ok:
        return None
    if defence == "relaxloss":
        return max(ok, key=lambda r: (r.privacy, r.accuracy))
    smallest = min(r.gap for r in ok)
    return min((r for r in ok if r.gap <= smallest + GAP_TOLERANCE), key=lambda r: r.seconds)


def table(rows: list[Row], best: set[str]) -> str:
    lines = [
        "| defence | setting | test acc | train loss | test loss | gap | time (s) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        mark = " **(recommended)**" if f"{r.defence}/{r.setting}" in best else ""
        lines.append(f"| {r.defence} | {r.setting}{mark} | {r.accuracy:.3f} | {r.train_loss:.3f} | "
                     f"{r.test_loss:.3f} | {r.gap:.3f} | {r.seconds:.1f} |")  # fmt: skip
    return "\n".join(lines)


def audit_design(p: PreparedData, base: np.ndarray, rest: np.ndarray, targets: int) -> tuple:
    """~1300 rows: the base records in every model, the other candidates each in half of the models."""
    rng = np.random.default_rng(1)
    X = np.concatenate([p.X[base], p.X[rest]]).astype(np.float32)
    y = np.concatenate([p.y[base], p.y[rest]])
    mask = np.ones((targets, len(X)), bool)
    half = np.zeros(targets, bool)
    half[: targets // 2] = True
    mask[:, len(base) :] = np.stack([rng.permutation(half) for _ in rest], axis=1)
    return X, y, mask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=4, help="models per setting")
    parser.add_argument("--targets", type=int, default=64, help="targets in the timing runs (0: skip)")
    parser.add_argument("--quick", action="store_true", help="one schedule, two SELENA splits")
    args = parser.parse_args()

    p = PreparedData.load("data/prepared/digits.npz")
    candidates = np.concatenate([p.train_idx, p.pool_idx])
    order = np.random.default_rng(0).permutation(candidates)
    base, rest = order[:1000], order[1000:]
    data = {"X": p.X[base].astype(np.float32), "y": p.y[base], "Xe": p.X[p.eval_idx], "ye": p.y[p.eval_idx]}
    model = build_model("digits", p.input_shape, p.num_classes, (128,))
    started = time.perf_counter()
    rows = run_grid(model, data, args.models, args.quick)
    picks = {d: recommend(rows, d) for d in ("relaxloss", "selena")}
    best = {f"{r.defence}/{r.setting}" for r in picks.values() if r is not None}
    print(f"\n{args.models} models per setting, 1000 base records, test on eval_idx "
          f"({len(p.eval_idx)} rows); target test accuracy ≥ {TARGET_ACCURACY}\n")  # fmt: skip
    print(table(rows, best))
    for d, r in picks.items():
        found = f"{r.setting} (test acc {r.accuracy:.3f}, gap {r.gap:.3f})" if r else "none reaches it"
        print(f"\n{d}: {found}")
    if args.targets:
        X, y, mask = audit_design(p, base, rest, args.targets)
        print(f"\nTiming: {args.targets} targets, {len(X)} rows, {int(mask.sum(1).mean())} members each\n")
        print("| defence | setting | models trained | test acc | time (s) |\n|---|---|---:|---:|---:|")
        params, s = timed(lambda: train_minibatch(
            model, X, y, mask, cross_entropy, learning_rate=1.0, steps=steps_for(30, Q), sampling_rate=Q,
            seed=0, desc="none"))  # fmt: skip
        acc = evaluate(model, params, data)[0]
        print(f"| none | lr 1.0, 30 epochs | {args.targets} | {acc:.3f} | {s:.1f} |")
        for d, r in picks.items():
            if r is None:
                continue
            cfg = r.config
            if isinstance(cfg, RelaxLossConfig):
                params, s = timed(lambda cfg=cfg: train_relaxloss(model, X, y, mask, cfg, seed=0))
                count = args.targets
            else:
                assert isinstance(cfg, SelenaConfig)
                params, s = timed(lambda cfg=cfg: train_selena(model, X, y, mask, cfg, seed=0))
                count = args.targets * (cfg.submodels + 1)
            print(f"| {d} | {r.setting} | {count} | {evaluate(model, params, data)[0]:.3f} | {s:.1f} |")
    print(f"\ntotal {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
