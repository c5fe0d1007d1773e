"""The six threat models of Nasr et al. 2021, Table I (:data:`dpaudit.references.NASR_2021`):
crafters, what the trainer reveals, and distinguishers.

Every ``play_*`` function plays one cell of the game: all 2N trials of one threat model and one noise
multiplier train at once through the shared DP-SGD trainer (:mod:`dpaudit.training.dpsgd`), and it
returns the view of the threat model as arrays with a trial axis (``inserted`` = 1 in world D′):

- **A** API access, §IV-A — Crafter 1: a population record (x, y), fresh per trial (or fixed); D′ =
  D ∪ {(x, y)}. Distinguisher 1: the final model's loss on (x, y) (:func:`play_api_access`).
- **B** static poison, §IV-B — Crafter 2 (:func:`craft_static_poison`): n shadow models trained at once
  on disjoint data with the same hyper-parameters; from a population record, T_c normalised
  gradient-*ascent* steps on x of the mean shadow loss, clipped to the input range. Distinguisher 1 on
  that x (:func:`play_static_poison`, which also records the loss at every θ_i).
- **C** intermediate models, §IV-C — Crafter 2; Distinguisher 2: max and mean of ℓ(θ_i; x, y) over all
  steps, and the final loss (the same trials as B: the trainer reveals every θ_i to C and only θ_T to
  B, so C can always do what B does).
- **D** adaptive poison, §IV-D — Crafter 3 (:func:`adaptive_poison_injector`): the query (x_q, y_q) is
  Crafter 2's poison and is never inserted; at every step of world D′ a fresh x is crafted from x_q
  (``adaptive_start: query``; the paper starts from 0, ``zero``) by double back-propagation so that
  one virtual SGD step on (x, y_q) lowers ℓ(x_q, y_q); its clipped gradient enters the step with
  probability q (the trainer's injector). Distinguisher 2 on (x_q, y_q) (:func:`play_adaptive_poison`).
- **E** gradient canary, §IV-E — Crafter 4 after t_o warm-up steps (:func:`play_gradient_canary`): per
  trial, the 2n coordinates with the smallest summed |update|, canary ±C/√(2n) (norm C), added in world
  D′ with probability q at every later step. Distinguisher 3: the likelihood-ratio test of the
  Poisson-subsampled Gaussian on the privatized sums projected on the canary
  (:func:`dpaudit.attacks.gradient_canary.distinguisher3_scores`), and the paper's literal test.
- **F** malicious dataset, §IV-F — Crafter 5 (:func:`craft_malicious_dataset`): D is random inputs in the
  input range labelled by the initial model θ_0, learning rate 0; then Crafter 4 and Distinguisher 3 on
  every step (:func:`play_malicious_dataset`). With learning rate 0 every update is 0, so Crafter 4's
  "smallest summed |update|" is read as the smallest summed |clipped gradient| of D at θ_0, which the
  adversary can compute because it chose D and θ_0 does not move.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from dpaudit.attacks.gradient_canary import (
    canary_gradient,
    canary_projection,
    canary_signs,
    distinguisher3_literal_scores,
    distinguisher3_scores,
    smallest_update_coordinates,
)
from dpaudit.training.dpsgd import (
    DPSGDConfig,
    InjectedGradient,
    Injector,
    Observer,
    StepState,
    privatized_sum_observer,
    train_trials,
)
from dpaudit.training.models import Conv2D, Dense, Flatten, Model

__all__ = [
    "Game",
    "adaptive_poison_injector",
    "craft_malicious_dataset",
    "craft_static_poison",
    "distinguisher2_statistics",
    "play_adaptive_poison",
    "play_api_access",
    "play_gradient_canary",
    "play_malicious_dataset",
    "play_static_poison",
    "point_loss_observer",
    "train_shadow_models",
]


@dataclass(frozen=True)
class Game:
    """What every cell shares: the model, D, the population pool, the evaluation rows, DP-SGD's knobs.

    ``lo``/``hi`` are the per-feature input range (the crafters keep inputs inside it).
    """

    model: Model
    X_d: np.ndarray
    y_d: np.ndarray
    X_pool: np.ndarray
    y_pool: np.ndarray
    X_eval: np.ndarray
    y_eval: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    sampling_rate: float
    steps: int
    clip_norm: float
    learning_rate: float
    chunk_size: int | None = None

    def config(
        self, noise_multiplier: float, *, steps: int | None = None, learning_rate: float | None = None
    ) -> DPSGDConfig:
        """DP-SGD of this game at noise z (optionally other steps / learning rate)."""
        return DPSGDConfig(
            clip_norm=self.clip_norm,
            noise_multiplier=float(noise_multiplier),
            learning_rate=self.learning_rate if learning_rate is None else float(learning_rate),
            steps=self.steps if steps is None else int(steps),
            sampling_rate=self.sampling_rate,
        )


# ------------------------------------------------------------------------------------------ helpers


def per_trial_losses(model: Model, params: Sequence[np.ndarray], X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ℓ(θ_t; x_{t,k}, y_{t,k}) ``[T, K]`` for per-trial inputs ``X [T, K, ...]`` and labels ``[T, K]``."""
    T = len(params[0])
    out = np.empty((T, X.shape[1]), dtype=np.float64)
    step = 2048
    for t0 in range(0, T, step):
        ps = [tf.constant(np.asarray(p[t0 : t0 + step], np.float32)) for p in params]
        logits, _ = model.forward(ps, tf.constant(np.asarray(X[t0 : t0 + step], np.float32)), shared=False)
        out[t0 : t0 + step] = model.example_losses(logits, tf.constant(y[t0 : t0 + step])).numpy()
    return out


def test_accuracy(model: Model, params: Sequence[np.ndarray], X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Accuracy ``[T]`` of every trial's final model on the evaluation rows."""
    probs = model.predict_proba(params, X)
    return np.mean(np.argmax(probs, axis=-1) == np.asarray(y)[None, :], axis=1)


def point_loss_observer(model: Model, x: np.ndarray, y: int) -> Observer:
    """Observer of ℓ(θ_i; x, y) ``[T]`` at every step (the view of Protocols 2–3 on one point, §IV-C),
    computed on that point alone, so that gathered Poisson batches stay cheap."""
    xt = tf.constant(np.asarray(x, np.float32)[None])
    yt = tf.constant([int(y)], tf.int32)

    def observe(state: StepState) -> dict[str, tf.Tensor]:
        logits, _ = model.forward(state.params, xt)
        return {"": model.example_losses(logits, yt)[:, 0]}

    return observe


def _split_flat(model: Model, flat: np.ndarray) -> list[np.ndarray]:
    """A flat ``[..., P]`` parameter vector as one array per parameter tensor ``[..., *shape]``."""
    lead = flat.shape[:-1]
    out, start = [], 0
    for shape in model.param_shapes:
        size = math.prod(shape)
        out.append(np.asarray(flat[..., start : start + size], np.float32).reshape(*lead, *shape))
        start += size
    return out


def _flat(params: Sequence[np.ndarray]) -> np.ndarray:
    """Parameters ``[T, ...]`` per tensor as one ``[T, P]`` array (the observer's flat order)."""
    return np.concatenate([np.asarray(p).reshape(len(p), -1) for p in params], axis=1)


def distinguisher2_statistics(loss_path: np.ndarray) -> dict[str, np.ndarray]:
    """Distinguisher 2 (§IV-C): scores from ℓ(θ_i; x, y) over all steps ``[T, steps + 1]`` (the last
    column is the final model) — the negated maximum, mean and final loss (a lower loss means the
    point was trained on: higher score = D′). The final loss is Distinguisher 1's statistic, which
    this view includes."""
    return {
        "max": -np.max(loss_path, axis=1),
        "mean": -np.mean(loss_path, axis=1),
        "final": -loss_path[:, -1],
    }


# ------------------------------------------------------------------------------------ A: API access


def play_api_access(
    game: Game, z: float, inserted: np.ndarray, seed: int, *, fresh: bool = True
) -> dict[str, np.ndarray]:
    """Threat model A (§IV-A): Crafter 1 and the final model's loss on the record (Distinguisher 1)."""
    T = len(inserted)
    rng = np.random.default_rng([seed, 1])
    count = T if fresh else 1
    picks = rng.choice(len(game.X_pool), size=count, replace=count > len(game.X_pool))
    record_of_trial = np.arange(T) if fresh else np.zeros(T, dtype=np.int64)
    X = np.concatenate([game.X_d, game.X_pool[picks]])
    y = np.concatenate([game.y_d, game.y_pool[picks]])
    n = len(game.X_d)
    mask = np.zeros((T, len(X)), dtype=bool)
    mask[:, :n] = True
    mask[np.arange(T), n + record_of_trial] = inserted.astype(bool)
    result = train_trials(
        game.model, X, y, mask, game.config(z), seed=seed, chunk_size=game.chunk_size, desc="A: API access"
    )
    xt = game.X_pool[picks][record_of_trial][:, None]
    yt = game.y_pool[picks][record_of_trial][:, None]
    loss = per_trial_losses(game.model, result.params, xt, yt)[:, 0]
    return {
        "inserted": inserted,
        "final_loss": loss,
        "test_accuracy": test_accuracy(game.model, result.params, game.X_eval, game.y_eval),
    }


# ------------------------------------------------------------------------------ B/C: static poison


def train_shadow_models(game: Game, z: float, count: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Crafter 2's shadow models: ``count`` models trained at once on disjoint pool subsets of size
    min(|D|, |pool|/(count+1)), with the game's hyper-parameters. Returns their weights and the pool
    rows they did not use (the start record is drawn from those)."""
    rng = np.random.default_rng([seed, 2])
    order = rng.permutation(len(game.X_pool))
    size = max(1, min(len(game.X_d), len(game.X_pool) // (count + 1)))
    mask = np.zeros((count, len(game.X_pool)), dtype=bool)
    for s in range(count):
        mask[s, order[s * size : (s + 1) * size]] = True
    result = train_trials(
        game.model, game.X_pool, game.y_pool, mask, game.config(z), seed=seed + 7, desc="Crafter 2: shadows"
    )
    return result.params, order[count * size :]


def craft_static_poison(
    model: Model,
    shadow_params: Sequence[np.ndarray],
    x0: np.ndarray,
    y0: int,
    lo: np.ndarray,
    hi: np.ndarray,
    steps: int,
    step_size: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Crafter 2 (§IV-B): gradient ascent on x of the mean shadow loss, kept in [lo, hi].

    Each of ``steps`` steps moves x by ``step_size``·(hi − lo) along the normalised input gradient of
    the mean shadow loss (:meth:`Model.input_gradients`) and clips to the range. Returns the poison
    and the mean shadow loss before every step and after the last (``[steps + 1]``).
    """
    x = np.asarray(x0, np.float32).copy()
    span = np.maximum(np.asarray(hi, np.float32) - np.asarray(lo, np.float32), 1e-6)
    labels = np.full((1,), int(y0))
    history = []
    for _ in range(steps):
        losses = model.losses(shadow_params, x[None], labels)
        history.append(float(np.mean(losses)))
        g = np.asarray(model.input_gradients(shadow_params, x[None], labels)).mean(axis=0)[0]
        g = g * span
        norm = float(np.linalg.norm(g))
        if norm == 0.0:
            break
        x = np.clip(x + step_size * span * g / norm, lo, hi).astype(np.float32)
    history.append(float(np.mean(model.losses(shadow_params, x[None], labels))))
    return x, np.asarray(history)


def play_static_poison(
    game: Game, z: float, inserted: np.ndarray, seed: int, poison: np.ndarray, label: int
) -> dict[str, np.ndarray]:
    """Threat models B and C (§IV-B/C) on the same trials: D′ = D ∪ {poison}; records ℓ(θ_i; poison)
    at every step (C's view) and on the final model (B's view)."""
    T = len(inserted)
    X = np.concatenate([game.X_d, poison[None]])
    y = np.concatenate([game.y_d, [label]])
    mask = np.zeros((T, len(X)), dtype=bool)
    mask[:, :-1] = True
    mask[:, -1] = inserted.astype(bool)
    result = train_trials(
        game.model,
        X,
        y,
        mask,
        game.config(z),
        seed=seed,
        observers={"loss": point_loss_observer(game.model, poison, label)},
        chunk_size=game.chunk_size,
        desc="B/C: static poison",
    )
    final = per_trial_losses(game.model, result.params, np.broadcast_to(poison, (T, 1, *poison.shape)),
                             np.full((T, 1), label))[:, 0]  # fmt: skip
    path = np.concatenate([result.records["loss"], final[:, None]], axis=1)
    return {
        "inserted": inserted,
        "final_loss": final,
        "loss_path": path.astype(np.float32),
        "test_accuracy": test_accuracy(game.model, result.params, game.X_eval, game.y_eval),
    }


# ---------------------------------------------------------------------------- D: adaptive poison


def craft_adaptive_input(
    model: Model,
    params: Sequence[tf.Tensor],
    x_query: tf.Tensor,
    y_query: int,
    lo: np.ndarray,
    hi: np.ndarray,
    steps: int,
    step_size: float,
    virtual_learning_rate: float,
    start: str = "zero",
    clip_norm: float | None = None,
) -> tf.Tensor:
    """Crafter 3's inner loop (§IV-D): per trial, x ``[T, 1, ...]`` by double back-propagation.

    Minimises the query's loss after one virtual step, ℓ(θ − η_v·clip_C(∇_θ ℓ(θ; x, y_q)); x_q, y_q), over
    x by ``steps`` normalised gradient steps of ``step_size``·(hi − lo), clipped to [lo, hi], from x = 0
    (the paper's start) or from x = x_q (``start="query"``), and returns the best iterate, the start
    included. The virtual step clips to C as DP-SGD does (``clip_norm``; None: unclipped, the paper's
    literal step): unclipped, the objective rewards a large gradient that the real step then scales
    down, and x drifts away from x_q, whose clipped gradient is already the steepest first-order descent
    of the query's loss. With the start kept as a candidate, D's inserted gradient is never worse than
    C's poison by this objective. Runs eagerly or inside the compiled step.
    """
    T = tf.shape(params[0])[0]
    span = tf.constant(np.maximum(np.asarray(hi) - np.asarray(lo), 1e-6), tf.float32)
    lo_t, hi_t = tf.constant(lo, tf.float32), tf.constant(hi, tf.float32)
    shape = tf.concat([[T, 1], tf.constant(model.input_shape, tf.int32)], 0)
    if start == "query":
        x = tf.broadcast_to(tf.convert_to_tensor(x_query, tf.float32)[None], shape)
    elif start == "zero":
        x = tf.zeros(shape)
    else:
        raise ValueError(f"start must be 'query' or 'zero', got {start!r}")
    x = tf.clip_by_value(x, lo_t, hi_t)
    labels = tf.fill([T, 1], tf.constant(int(y_query), tf.int32))
    query_labels = tf.constant([int(y_query)], tf.int32)
    reduce_axes = list(range(2, 2 + len(model.input_shape)))
    x_axes = [1] * (1 + len(model.input_shape))

    def query_loss_after_step(x: tf.Tensor) -> tf.Tensor:
        """Per trial ``[T]``: the query's loss after the virtual step on (x, y_q)."""
        with tf.GradientTape() as inner:
            inner.watch(params)
            logits, _ = model.forward(params, x, shared=False)
            loss = tf.reduce_sum(model.example_losses(logits, labels))
        grads = inner.gradient(loss, params)
        if clip_norm is not None:
            norms = tf.sqrt(
                tf.add_n([tf.reduce_sum(tf.square(tf.reshape(g, [T, -1])), axis=1) for g in grads]) + 1e-24
            )
            scale = tf.minimum(1.0, clip_norm / norms)
            grads = [g * tf.reshape(scale, [-1] + [1] * (len(g.shape) - 1)) for g in grads]
        virtual = [p - virtual_learning_rate * g for p, g in zip(params, grads, strict=True)]
        q_logits, _ = model.forward(virtual, x_query)
        return tf.reshape(model.example_losses(q_logits, query_labels), [T])

    best_x, best_loss = x, tf.fill([T], np.float32(np.inf))
    for step in range(steps + 1):
        with tf.GradientTape() as outer:
            outer.watch(x)
            q_loss = query_loss_after_step(x)
            total = tf.reduce_sum(q_loss)
        better = q_loss < best_loss
        best_x = tf.where(tf.reshape(better, [-1, *x_axes]), x, best_x)
        best_loss = tf.where(better, q_loss, best_loss)
        if step == steps:
            break
        gx = outer.gradient(total, x) * span
        norm = tf.sqrt(tf.reduce_sum(tf.square(gx), axis=reduce_axes, keepdims=True)) + 1e-12
        x = tf.clip_by_value(x - step_size * span * gx / norm, lo_t, hi_t)
    return best_x


def adaptive_poison_injector(
    model: Model,
    x_query: np.ndarray,
    y_query: int,
    lo: np.ndarray,
    hi: np.ndarray,
    steps: int,
    step_size: float,
    virtual_learning_rate: float,
    start: str = "zero",
    clip_norm: float | None = None,
) -> Injector:
    """Crafter 3 as a trainer injector: each step, craft x per trial and return ∇_θ ℓ(θ_i; x, y_q)
    (the trainer clips it to C and adds it with probability q where the world gate is 1)."""
    xq = tf.constant(np.asarray(x_query, np.float32)[None])

    def inject(state: StepState) -> list[tf.Tensor]:
        params = list(state.params)
        x = tf.stop_gradient(
            craft_adaptive_input(
                model, params, xq, y_query, lo, hi, steps, step_size, virtual_learning_rate, start, clip_norm
            )
        )
        T = tf.shape(params[0])[0]
        with tf.GradientTape() as tape:
            tape.watch(params)
            logits, _ = model.forward(params, x, shared=False)
            loss = tf.reduce_sum(model.example_losses(logits, tf.fill([T, 1], tf.constant(int(y_query)))))
        return tape.gradient(loss, params)

    return inject


def play_adaptive_poison(
    game: Game,
    z: float,
    inserted: np.ndarray,
    seed: int,
    query: np.ndarray,
    label: int,
    *,
    steps: int,
    step_size: float,
    virtual_learning_rate: float | None,
    start: str = "zero",
) -> dict[str, np.ndarray]:
    """Threat model D (§IV-D): both worlds train on D; world D′ gets Crafter 3's gradient each step
    with probability q; the view is ℓ(θ_i; x_q, y_q) at every step and on the final model.

    Crafter 3's virtual step is the real one for a single example: clipped to C and at rate η/(q|D|)
    (the trainer divides the noisy sum by the expected batch q|D|) unless ``virtual_learning_rate`` is
    given. A much larger virtual rate (the earlier default, 1.0, is 50× adult's real one) rewards x whose
    large, non-linear step helps the query, not the small first-order step training takes."""
    T = len(inserted)
    mask = np.ones((T, len(game.X_d)), dtype=bool)
    if virtual_learning_rate is None:
        virtual_learning_rate = game.learning_rate / (game.sampling_rate * len(game.X_d))
    injector = adaptive_poison_injector(
        game.model, query, label, game.lo, game.hi, steps, step_size, virtual_learning_rate, start,
        clip_norm=game.clip_norm,
    )  # fmt: skip
    result = train_trials(
        game.model,
        game.X_d,
        game.y_d,
        mask,
        game.config(z),
        seed=seed,
        observers={"loss": point_loss_observer(game.model, query, label)},
        injector=injector,
        injector_gate=inserted.astype(np.float32),
        chunk_size=game.chunk_size,
        desc="D: adaptive poison",
    )
    final = per_trial_losses(game.model, result.params, np.broadcast_to(query, (T, 1, *query.shape)),
                             np.full((T, 1), label))[:, 0]  # fmt: skip
    return {
        "inserted": inserted,
        "loss_path": np.concatenate([result.records["loss"], final[:, None]], axis=1).astype(np.float32),
        "test_accuracy": test_accuracy(game.model, result.params, game.X_eval, game.y_eval),
    }


# ---------------------------------------------------------------------------- E: gradient canary


def _projection_observer(state: StepState) -> dict[str, tf.Tensor]:
    """⟨g̃_t, u_t⟩ ``[T]``: the privatized sum projected on each trial's unit canary direction
    (``trial_data["unit"]``, flat ``[T, P]``), one scalar per trial and step."""
    T = tf.shape(state.sigma)[0]
    flat = tf.concat([tf.reshape(g, [T, -1]) for g in state.privatized_sum], axis=1)
    return {"": tf.reduce_sum(flat * state.trial_data["unit"], axis=1)}


def inert_coordinates(model: Model, X: np.ndarray) -> np.ndarray:
    """Flat parameter coordinates that no record of ``X`` can move or be moved by: the first dense
    layer's weights from input features that are 0 in every row (∂ℓ/∂W[i, j] = x_i·δ_j = 0, and W[i, :]
    never reaches the forward pass). ``[P]`` booleans; all False unless the first weighted layer is dense
    and sees the raw features (a convolution shares its kernel across positions; pooling mixes them)."""
    inert = np.zeros(model.num_params, dtype=bool)
    at = next(i for i, layer in enumerate(model.layers) if isinstance(layer, Dense | Conv2D))
    first = model.layers[at]
    if isinstance(first, Dense) and all(isinstance(layer, Flatten) for layer in model.layers[:at]):
        zero_features = np.all(np.asarray(X).reshape(len(X), -1) == 0, axis=0)
        inert[: zero_features.size * first.units] = np.repeat(zero_features, first.units)
    return inert


def place_canaries(
    abs_sum: np.ndarray, sizes: np.ndarray, inert: np.ndarray, placement: str
) -> tuple[list[np.ndarray], np.ndarray]:
    """Crafter 4's coordinates per trial: the 2n = ``sizes[t]`` with the smallest summed |update|
    (``placement="update"``, the paper's rule), or inert coordinates first and then that rule
    (``"inert"``). Also returns, per trial, whether every chosen coordinate is inert: only then does
    the data leave the canary's projections alone in both worlds (the per-step family law)."""
    if placement not in ("inert", "update"):
        raise ValueError(f"canary_placement must be 'inert' or 'update', got {placement!r}")
    key = abs_sum
    if placement == "inert" and inert.any():
        key = abs_sum + np.where(inert, 0.0, abs_sum.max() + 1.0)
    coords: list[np.ndarray] = [np.empty(0, np.int64)] * len(sizes)
    all_inert = np.zeros(len(sizes), dtype=bool)
    for size in np.unique(sizes):
        rows = np.flatnonzero(sizes == size)
        chosen = smallest_update_coordinates(key[rows], int(size))
        for r, c in zip(rows, chosen, strict=True):
            coords[r] = c
            all_inert[r] = bool(inert[c].all())
    return coords, all_inert


def play_gradient_canary(
    game: Game,
    z: float,
    inserted: np.ndarray,
    sizes: np.ndarray,
    seed: int,
    warmup: int,
    placement: str = "inert",
) -> dict[str, np.ndarray]:
    """Threat model E (§IV-E): t_o warm-up steps (one trainer call per step, summing |θ_{k+1} − θ_k|),
    Crafter 4 per trial with 2n = ``sizes[t]`` (:func:`place_canaries`), then T − t_o steps with the
    canary in world D′ (probability q per step) and the projection ⟨g̃_t, u⟩ observed at every one."""
    model = game.model
    T = len(inserted)
    mask = np.ones((T, len(game.X_d)), dtype=bool)
    params = model.init(T, seed)
    abs_sum = np.zeros((T, model.num_params), dtype=np.float64)
    one = game.config(z, steps=1)
    for k in range(warmup):
        result = train_trials(
            model, game.X_d, game.y_d, mask, one, seed=seed * 1000 + k + 1, init_params=params,
            chunk_size=game.chunk_size, desc="E: warm-up",
        )  # fmt: skip
        abs_sum += np.abs(_flat(result.params) - _flat(params))
        params = result.params
    coords, all_inert = place_canaries(abs_sum, sizes, inert_coordinates(model, game.X_d), placement)
    canary = np.zeros((T, model.num_params), dtype=np.float32)
    for r, c in enumerate(coords):
        canary[r] = canary_gradient(model.num_params, c, game.clip_norm)
    injected = InjectedGradient(
        grads=_split_flat(model, canary),
        weights=np.ones(T, np.float32),
        gate=inserted.astype(np.float32),
        per_trial=True,
    )
    result = train_trials(
        model,
        game.X_d,
        game.y_d,
        mask,
        game.config(z, steps=game.steps - warmup),
        seed=seed * 1000,
        init_params=params,
        injected=injected,
        observers={"dot": _projection_observer},
        trial_data={"unit": canary / game.clip_norm},
        chunk_size=game.chunk_size,
        desc="E: gradient canary",
    )
    return {
        "inserted": inserted,
        "canary_size": sizes,
        "canary_inert": all_inert,
        "dots": result.records["dot"].astype(np.float64),
        "test_accuracy": test_accuracy(model, result.params, game.X_eval, game.y_eval),
    }


def distinguisher3(
    dots: np.ndarray, sizes: np.ndarray, *, sampling_rate: float, noise_std: float, clip_norm: float
) -> tuple[np.ndarray, np.ndarray]:
    """Distinguisher 3 (§IV-E): the likelihood-ratio scores and the paper's literal scores ``[T]``
    from the projections d_t ``[T, steps]`` (the literal test takes the sign-aligned sums √(2n)·d_t)."""
    lr = distinguisher3_scores(dots, sampling_rate=sampling_rate, noise_std=noise_std, canary_norm=clip_norm)
    literal = np.empty(len(dots))
    for size in np.unique(sizes):
        rows = sizes == size
        literal[rows] = distinguisher3_literal_scores(
            np.sqrt(size) * dots[rows], num_coordinates=int(size), clip_norm=clip_norm, noise_std=noise_std
        )
    return lr, literal


# -------------------------------------------------------------------------- F: malicious dataset


def craft_malicious_dataset(
    model: Model, params0: Sequence[np.ndarray], size: int, lo: np.ndarray, hi: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Crafter 5 (§IV-F): ``size`` inputs uniform in [lo, hi], labelled by the initial model θ_0."""
    rng = np.random.default_rng([seed, 5])
    X = rng.uniform(0.0, 1.0, size=(size, *model.input_shape)).astype(np.float32)
    X = (np.asarray(lo) + X * (np.asarray(hi) - np.asarray(lo))).astype(np.float32)
    y = np.argmax(model.predict_proba(params0, X)[0], axis=-1)
    return X, y.astype(np.int64)


def clipped_gradient_mass(
    model: Model, params0: Sequence[np.ndarray], X: np.ndarray, y: np.ndarray, clip_norm: float
) -> np.ndarray:
    """Σ_n |clip_C(∇_θ ℓ(θ_0; x_n, y_n))| per flat coordinate ``[P]``: the expected update of D at θ_0
    up to the factor q·η, which Crafter 4 ranks when the learning rate is 0 (F)."""
    ps = [tf.constant(np.asarray(p, np.float32)) for p in params0]
    x = tf.constant(np.asarray(X, np.float32)[:, None])  # [N, 1, ...]: one "trial" per example
    tiled = [tf.repeat(p, len(X), axis=0) for p in ps]
    with tf.GradientTape() as tape:
        tape.watch(tiled)
        logits, _ = model.forward(tiled, x, shared=False)
        loss = tf.reduce_sum(model.example_losses(logits, tf.constant(np.asarray(y)[:, None], tf.int32)))
    grads = _flat([g.numpy() for g in tape.gradient(loss, tiled)])  # [N, P]
    norms = np.linalg.norm(grads, axis=1, keepdims=True)
    clipped = grads * np.minimum(1.0, clip_norm / np.maximum(norms, 1e-12))
    return np.abs(clipped).sum(axis=0)


def silence_features(model: Model, X: np.ndarray, canary_size: int, seed: int) -> np.ndarray:
    """Crafter 5's dataset with a few input features set to 0 in every record, when the model's first
    weighted layer is dense on the raw features: the first-layer weights of those features then get
    no gradient from any record (∂ℓ/∂W[i, j] = x_i·δ_j = 0), so Crafter 4 finds 2n coordinates where
    the data's clipped gradients are exactly 0 and the per-step baseline is 0 by construction. The
    adversary of threat model F writes the whole dataset, so this is within its power. Otherwise
    (convolutions, pooling first) ``X`` is returned unchanged."""
    at = next(i for i, layer in enumerate(model.layers) if isinstance(layer, Dense | Conv2D))
    first = model.layers[at]
    if not (isinstance(first, Dense) and all(isinstance(layer, Flatten) for layer in model.layers[:at])):
        return X
    flat = np.asarray(X).reshape(len(X), -1).copy()
    count = min(-(-canary_size // first.units), flat.shape[1] - 1)
    silent = np.random.default_rng([seed, 55]).choice(flat.shape[1], size=count, replace=False)
    flat[:, silent] = 0.0
    return flat.reshape(np.shape(X)).astype(np.asarray(X).dtype)


def play_malicious_dataset(
    game: Game,
    z: float,
    inserted: np.ndarray,
    seed: int,
    *,
    dataset_size: int,
    canary_size: int,
    batch_trials: int = 2000,
) -> dict[str, np.ndarray]:
    """Threat model F (§IV-F): Crafter 5's dataset, learning rate 0, θ_0 shared by every trial;
    Crafter 4's canary in world D′ from the first step; the privatized sums at its coordinates at
    every step. Trials go through the trainer ``batch_trials`` at a time (one compiled trace),
    which releases only the canary coordinates (``train_trials(released=...)``: θ never moves, so
    the rest of the privatized sum is never seen and its noise is not drawn)."""
    model = game.model
    params0 = model.init(1, seed)
    X, y = craft_malicious_dataset(model, params0, dataset_size, game.lo, game.hi, seed)
    X = silence_features(model, X, canary_size, seed)
    mass = clipped_gradient_mass(model, params0, X, y, game.clip_norm)
    coords = smallest_update_coordinates(mass, canary_size)
    canary = canary_gradient(model.num_params, coords, game.clip_norm)
    grads = _split_flat(model, canary)
    cfg = game.config(z, learning_rate=0.0)
    T = len(inserted)
    dots = np.empty((T, game.steps))
    signs = canary_signs(canary_size)
    for start in range(0, T, batch_trials):
        gate = inserted[start : start + batch_trials].astype(np.float32)
        t = len(gate)
        result = train_trials(
            model,
            X,
            y,
            np.ones((t, len(X)), dtype=bool),
            cfg,
            seed=seed * 1000 + start // batch_trials,
            init_params=[np.broadcast_to(p, (t, *p.shape[1:])).copy() for p in params0],
            injected=InjectedGradient(grads=grads, weights=np.ones(t, np.float32), gate=gate),
            observers={"sum": privatized_sum_observer(coords.tolist())},
            chunk_size=game.chunk_size,
            desc="F: malicious dataset",
            released=coords.tolist(),
        )
        dots[start : start + t] = canary_projection(result.records["sum"], signs)
    accuracy = test_accuracy(model, params0, game.X_eval, game.y_eval)
    return {
        "inserted": inserted,
        "canary_size": np.full(T, canary_size),
        "dots": dots,
        "test_accuracy": np.full(T, float(accuracy[0])),
        "data_mass_at_canary": np.asarray(float(mass[coords].sum())),
    }
