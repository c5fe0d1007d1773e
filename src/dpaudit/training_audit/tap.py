"""Check what the tap assumes: that the gradient handed to ``apply_gradients`` is what moved the weights.

The observer reads the privatized gradient where the user's code hands it to the optimizer. That is
the release DP-SGD protects only if the optimizer's update is a deterministic function of it; noise
added inside the optimizer (as Opacus does), clipping or other changes there make the tapped gradient
a *pre*-release quantity, and a bound computed from it assumes something untrue. So at every step
the audited weights' actual change Δ_t (the first kernel's canary and probe rows) is compared with
the change the optimizer's own update rule makes of the tapped gradient g_t, replayed here in float64
on those coordinates:

* SGD (Keras and legacy, TF Privacy's DP optimizers derive from them): Δ = −η_t·g (momentum μ:
  v ← μv − η_t g, Δ = v; Nesterov: Δ = μv − η_t g), Robbins & Monro 1951; Sutskever et al. 2013;
* Adam: m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², Δ = −η_t·√(1−β₂^t)/(1−β₁^t)·m/(√v + ε)
  (Kingma & Ba 2015, Alg. 1 with the "efficient" ordering that Keras uses);
* the optimizer's own ``clipnorm`` / ``global_clipnorm`` / ``clipvalue`` and decoupled weight decay
  (Loshchilov & Hutter 2019) are part of the rule; η_t is read from the optimizer at the step.

Adam's first step is −η·sign(g) up to ε, so noise that flips no sign is invisible at that step (only
there). Any other optimizer: only coordinates whose tapped gradient has been exactly 0 at every step so far
are tested (every elementwise optimizer leaves them where they are). Stateful rules need a fresh
optimizer (no step before the audit); otherwise they fall back to that support test.

The per-step evidence is the relative excess mismatch ‖(|Δ − Δ̂| − f)₊‖ / max(‖Δ‖, ‖Δ̂‖), where f is
the float32 rounding allowance of the weights and of the update; NaN where nothing could be tested.
Where any step exceeds :data:`TOLERANCE` the observer reads the weights' change instead (``source``
``"iterates"``: a function of the released iterates, so the bound stays valid whatever the optimizer
does) and :func:`tap_check` says so.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpaudit.training_audit.check import TAP, CheckResult
from dpaudit.training_audit.transcript import Transcript

__all__ = ["NAME", "TOLERANCE", "TapVerifier", "current_learning_rate", "tap_check"]

NAME = TAP  # "tap_consistency"
#: A step whose relative excess mismatch exceeds this is not explained by the tapped gradient.
TOLERANCE = 1e-3
#: Rounding of float32 weights (per unit of |θ|) and of a replayed update (per unit of |Δ̂|).
EPS32 = float(np.finfo(np.float32).eps)
REPLAY_RTOL = 1e-4


def _is(optimizer: Any, name: str) -> bool:
    """Whether ``optimizer`` is (a subclass of) Keras' ``name``, new or legacy."""
    import tensorflow as tf

    classes = [getattr(tf.keras.optimizers, name, None), getattr(tf.keras.optimizers.legacy, name, None)]
    return any(c is not None and isinstance(optimizer, c) for c in classes)


def _legacy(optimizer: Any) -> bool:
    import tensorflow as tf

    return isinstance(optimizer, tf.keras.optimizers.legacy.Optimizer)


def current_learning_rate(optimizer: Any) -> Any:
    """η_t of the step about to be applied (graph-safe; call before the optimizer's own apply)."""
    import tensorflow as tf

    if _legacy(optimizer):
        return optimizer._decayed_lr(tf.float32)
    lr = optimizer._learning_rate
    if isinstance(lr, tf.keras.optimizers.schedules.LearningRateSchedule):
        lr = lr(optimizer.iterations)
    return tf.cast(lr, tf.float32)


class TapVerifier:
    """Replays the optimizer's update of the tapped gradient on the audited coordinates, step by step."""

    def __init__(self, optimizer: Any, kernel: Any) -> None:
        try:
            config: dict[str, Any] = dict(optimizer.get_config())
        except (RuntimeError, TypeError, ValueError):  # a custom optimizer may leave get_config unwritten
            config = {}
        fresh = int(optimizer.iterations.numpy()) == 0
        self.kind = "unknown"
        if _is(optimizer, "SGD"):
            momentum = float(config.get("momentum", 0.0) or 0.0)
            self.momentum, self.nesterov = momentum, bool(config.get("nesterov", False))
            self.kind = "sgd" if momentum == 0.0 else ("momentum" if fresh else "unknown")
        elif _is(optimizer, "Adam") and not config.get("amsgrad", False) and fresh:
            self.kind = "adam"
            self.beta_1, self.beta_2 = float(config["beta_1"]), float(config["beta_2"])
            self.epsilon = float(config["epsilon"])
        self.clipnorm = config.get("clipnorm") or None
        self.global_clipnorm = config.get("global_clipnorm") or None
        self.clipvalue = config.get("clipvalue") or None
        decay = config.get("weight_decay") if not _legacy(optimizer) else None
        use = getattr(optimizer, "_use_weight_decay", lambda v: True)
        self.weight_decay = float(decay) if decay and use(kernel) else 0.0
        self.description = self._describe(type(optimizer).__name__, fresh)
        self._state: dict[str, np.ndarray] = {}
        self._ever_nonzero: np.ndarray | None = None

    def _describe(self, name: str, fresh: bool) -> str:
        rule = {
            "sgd": f"{name}: Δ = −η·g",
            "momentum": f"{name} with momentum {getattr(self, 'momentum', 0.0):g}"
            + (" (Nesterov)" if getattr(self, "nesterov", False) else ""),
            "adam": f"{name}: Adam's update of g",
        }.get(self.kind)
        if rule is None:
            why = "its state before the audit is unknown" if not fresh else "its update rule is not replayed"
            return (
                f"{name} ({why}): only weights whose tapped gradient was 0 at every step so far are "
                "tested, and they must not move"
            )
        extras = [
            f"{label} {value:g}"
            for label, value in (
                ("clipnorm", self.clipnorm),
                ("global_clipnorm", self.global_clipnorm),
                ("clipvalue", self.clipvalue),
                ("weight decay", self.weight_decay or None),
            )
            if value
        ]
        return rule + (f" with the optimizer's {', '.join(extras)}" if extras else "")

    def _clip(self, g: np.ndarray, kernel_norm: float, global_norm: float) -> np.ndarray:
        """The optimizer's own gradient clipping, in Keras' order (clipnorm, else global, else value)."""
        if self.clipnorm:
            return g * min(1.0, self.clipnorm / max(kernel_norm, 1e-30))
        if self.global_clipnorm:
            return g * min(1.0, self.global_clipnorm / max(global_norm, 1e-30))
        if self.clipvalue:
            return np.clip(g, -self.clipvalue, self.clipvalue)
        return g

    def _replay(self, g: np.ndarray, theta: np.ndarray, lr: float, iteration: int) -> np.ndarray:
        """Δ̂ of this step (updates the replayed optimizer state)."""
        decay = -lr * self.weight_decay * theta
        if self.kind == "sgd":
            return decay - lr * g
        if self.kind == "momentum":
            v = self.momentum * self._state.get("v", np.zeros_like(g)) - lr * g
            self._state["v"] = v
            return decay + (self.momentum * v - lr * g if self.nesterov else v)
        m = self._state.get("m", np.zeros_like(g)) * self.beta_1 + (1.0 - self.beta_1) * g
        v = self._state.get("v", np.zeros_like(g)) * self.beta_2 + (1.0 - self.beta_2) * g * g
        self._state["m"], self._state["v"] = m, v
        t = iteration + 1
        alpha = lr * math.sqrt(1.0 - self.beta_2**t) / (1.0 - self.beta_1**t)
        return decay - alpha * m / (np.sqrt(v) + self.epsilon)

    def step(
        self,
        grad: np.ndarray,
        before: np.ndarray,
        after: np.ndarray,
        *,
        lr: float,
        iteration: int,
        kernel_norm: float,
        global_norm: float,
    ) -> float:
        """The relative excess mismatch of one step (module docstring); ``grad``, ``before``,
        ``after``: the tapped gradient and the weights before and after, on the audited coordinates."""
        g = np.asarray(grad, dtype=np.float64)
        before = np.asarray(before, dtype=np.float64)
        after = np.asarray(after, dtype=np.float64)
        moved = after - before
        floor = 2.0 * EPS32 * (np.abs(before) + np.abs(after))
        if self.kind == "unknown":
            nonzero = g != 0
            self._ever_nonzero = nonzero if self._ever_nonzero is None else self._ever_nonzero | nonzero
            still = ~self._ever_nonzero
            if self.weight_decay or not still.any():
                return math.nan
            predicted = np.zeros_like(moved)
            moved, predicted, floor = moved[still], predicted[still], floor[still]
        else:
            predicted = self._replay(self._clip(g, kernel_norm, global_norm), before, lr, iteration)
            floor = floor + REPLAY_RTOL * np.abs(predicted)
        excess = np.maximum(np.abs(moved - predicted) - floor, 0.0)
        scale = max(float(np.linalg.norm(moved)), float(np.linalg.norm(predicted)))
        return float(np.linalg.norm(excess)) / scale if scale > 0 else 0.0


def tap_check(transcript: Transcript, level: float) -> CheckResult:
    """Whether the gradient handed to ``apply_gradients`` explained every step's change of the audited
    weights (``transcript.update_mismatch``, see the module docstring).

    Deterministic (a float tolerance, no false alarms under a correct tap): its level is 0.0 and
    ``level`` is only validated. Never a ``"mismatch"``: an optimizer that privatizes inside
    ``apply_gradients`` is correct DP-SGD; the check says where the evidence came from instead.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    mismatch = transcript.update_mismatch
    rule = transcript.update_rule or "the optimizer's update rule"
    if mismatch is None:
        return CheckResult.not_applicable(
            NAME,
            "warning",
            "the optimizer's apply_gradients never received the audited layer's gradient, so there was no "
            "tap to check: the evidence is the weights' change (iterates); nothing to do",
        )
    mismatch = np.asarray(mismatch, dtype=np.float64)
    tested = np.isfinite(mismatch)
    bad = np.flatnonzero(tested & (mismatch > TOLERANCE))
    worst = float(np.nanmax(mismatch)) if tested.any() else math.nan
    if bad.size:
        where = (
            "the audit therefore read the weights' change at every step (source 'iterates', a function of "
            "the released iterates, so the ε lower bound stays valid; the checks that assume a plain SGD "
            "update become warnings)"
            if transcript.source == "iterates"
            else "yet this transcript still reads the tapped gradient: its bound assumes what failed here"
        )
        message = (
            f"the gradient handed to apply_gradients does not explain how the audited weights moved at "
            f"{bad.size} of {transcript.steps} steps (first at step {int(bad[0])}; largest relative mismatch "
            f"{worst:.3g} > tolerance {TOLERANCE:g}; rule: {rule}). Something between the tap and the "
            "weights changes the gradient: noise added inside the optimizer (as Opacus does), clipping or a "
            f"constraint there, or a second update; {where}. To audit the gradient itself, hand "
            "apply_gradients the privatized gradient and keep the optimizer's own noise and clipping off"
        )
        return CheckResult(
            name=NAME,
            kind="warning",
            rejected=True,
            level=0.0,
            p_value=None,
            statistic=worst,
            message=message,
        )
    if not tested.any():
        return CheckResult.not_applicable(
            NAME,
            "warning",
            f"the optimizer's update could not be replayed on any step ({rule}), so whether the gradient "
            "handed to apply_gradients is the privatized release is assumed, not checked; use SGD or Adam "
            "(fresh, as compiled) for a checked tap",
        )
    untested = int((~tested).sum())
    return CheckResult(
        name=NAME,
        kind="warning",
        rejected=False,
        level=0.0,
        p_value=None,
        statistic=worst,
        message=(
            f"the gradient handed to apply_gradients explains how the audited weights moved at all "
            f"{int(tested.sum())} steps tested (largest relative mismatch {worst:.3g} ≤ {TOLERANCE:g}; rule: "
            f"{rule})" + (f"; {untested} steps could not be tested" if untested else "")
        ),
    )
