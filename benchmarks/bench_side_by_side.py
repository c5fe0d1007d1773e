"""dpaudit's trainer side by side with TF Privacy's fast path, plain TF and the batched floor (issue 12).

Three workloads, timed per trained model, interleaved in one run (every method of every workload
once per round, 3 rounds; min and median reported), after one untimed warm-up of each method (so
no side pays for tracing in the timed rounds):

1. **adult full batch**: MLP 104-6-6-2, |D| = 1000, full batch, 30 steps, clip C = 3, noise
   z = 8.14; dpaudit runs the identifiability audit's real work (bounded neighbours,
   local-sensitivity noise, the DI observer), the other sides only train;
2. **adult Poisson**: the same MLP, |D| = 2000, Poisson sampling q = 0.1, 100 steps, C = 1, z = 1;
3. **mnist CNN**: 2 × (3×3 conv + 2×2 max pool), 16 and 32 filters, dense 10; 100 images of the
   official mnist test split (``DPAUDIT_DATA_MIRROR`` or ``/work/shared/datasets``; without it the
   scikit-learn digits upsampled to 28×28, said in the output), full batch, 30 steps.

Methods:

- ``dpaudit``: :func:`dpaudit.training.dpsgd.train_trials` (strategy chosen by
  :func:`~dpaudit.training.dpsgd.select_strategy`);
- ``tfp_fast``: TF Privacy 0.9.0's ``DPSequential`` with the default fast-clipping layer registry
  (dense layers; the CNN's convolutions are not registered, so TF Privacy itself falls back to
  vectorized per-example gradients), ``use_xla=False``, its ``train_step`` driven by a compiled
  ``tf.function`` loop over all steps of one model (Poisson batches drawn inside the loop) —
  not the 40–300× slower microbatch optimizers;
- ``plain_tf``: the same Keras model without DP, the same compiled loop, one model at a time;
- ``floor``: all trials batched on the trial axis with dpaudit's model functions, no clipping, no
  noise, one ``tf.function`` loop (the batched no-DP floor; not run for Poisson batches).

Peak RSS of 4000 adult full-batch trials is measured in a subprocess with ``resource.getrusage``.

    python benchmarks/bench_side_by_side.py [--quick] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("DPAUDIT_PROGRESS", "0")
# Every side of a run uses the same TensorFlow kernels: oneDNN's where TF_ENABLE_ONEDNN_OPTS=1 (TF
# 2.15's default only on CPUs with AVX-512 VNNI or newer), else Eigen's. The setting is printed and
# recorded; benchmarks/README.md reports runs under both.

import numpy as np
import tensorflow as tf

from dpaudit.training import dpsgd, models
from dpaudit.training.dpsgd.difference import di_observer

ROOT = Path(__file__).resolve().parents[1]
ADULT_Z, ADULT_C, ADULT_LR = 8.14, 3.0, 0.005


# ----------------------------------------------------------------------------------------- data
def adult() -> tuple[np.ndarray, np.ndarray]:
    """The adult population (vendored copy) as float32 features and int labels."""
    from dpaudit.data.parsers import parse_adult

    vendor = ROOT / "data" / "vendor" / "adult"
    d = parse_adult(vendor / "adult.data.gz", vendor / "adult.test.gz")
    return d.X.astype(np.float32), d.y.astype(np.int64)


def mnist100() -> tuple[np.ndarray, np.ndarray, str]:
    """100 mnist test-split images, or (without the files) 100 digits upsampled to 28×28."""
    from dpaudit.data.parsers import parse_mnist

    mirror = Path(os.environ.get("DPAUDIT_DATA_MIRROR", "/work/shared/datasets")) / "mnist"
    try:
        d = parse_mnist(mirror, "test")
        return d.X[:100], d.y[:100], f"mnist test split ({mirror})"
    except (FileNotFoundError, ValueError):
        from sklearn.datasets import load_digits

        digits = load_digits()
        img = tf.image.resize(digits.images[:100, :, :, None] / 16.0, [28, 28]).numpy().astype(np.float32)
        return img, digits.target[:100].astype(np.int64), "scikit-learn digits upsampled to 28x28"


# ------------------------------------------------------------------------------------ workloads
def no_dp_loop(model: models.Model, X: np.ndarray, y: np.ndarray, learning_rate: float) -> Any:
    """Plain gradient descent with dpaudit's own model functions and no DP (no clipping, no noise),
    all trials on the trial axis, as a compiled loop ``train(params, steps)``: the batched no-DP
    floor, which the profiling scripts reuse."""
    Xt, yt = tf.constant(X), tf.constant(y)

    def step(p: list[tf.Tensor]) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch(p)
            logits, _ = model.forward(p, Xt)
            loss = tf.reduce_sum(tf.reduce_mean(model.example_losses(logits, yt), axis=1))
        grads = tape.gradient(loss, p)
        return [a - learning_rate * g for a, g in zip(p, grads, strict=True)]

    if any(isinstance(layer, models.MaxPool) for layer in model.layers):
        # as in dpaudit's trainer: a step of its own gets oneDNN's fast pooling gradient every time
        step = tf.function(step, experimental_attributes={"_noinline": True})

    @tf.function(reduce_retracing=True)
    def train(params: list[tf.Tensor], steps: tf.Tensor) -> list[tf.Tensor]:
        def body(i: tf.Tensor, p: list[tf.Tensor]) -> tuple:
            return i + 1, step(p)

        return tf.while_loop(lambda i, p: i < steps, body, (tf.constant(0), list(params)))[1]

    return train


class Workload:
    """One workload: data, model, DP-SGD settings and each method as a callable that trains and
    returns the number of models it trained."""

    def __init__(self, name: str, model: models.Model, X: np.ndarray, y: np.ndarray, cfg: dpsgd.DPSGDConfig,
                 trials: int, models_per_loop: int, floor_trials: int) -> None:  # fmt: skip
        self.name, self.model, self.X, self.y, self.cfg = name, model, X, y, cfg
        self.trials, self.loop_models, self.floor_trials = trials, models_per_loop, floor_trials
        self.init = model.init(max(trials, floor_trials, models_per_loop), seed=0)

    # dpaudit ---------------------------------------------------------------------------------
    def dpaudit(self) -> int:
        if self.name == "adult_full":
            n = len(self.X)
            pool = np.concatenate([self.X, self.X[:1] * 0.0])
            ypool = np.concatenate([self.y, self.y[:1]])
            world = np.arange(self.trials) % 2
            mask = np.ones((self.trials, n + 1), bool)
            mask[:, n] = False
            mask[world == 0, 0] = False
            mask[world == 0, n] = True
            dpsgd.train_trials(
                self.model, pool, ypool, mask, self.cfg, seed=0,
                tracked=dpsgd.TrackedRecords((0, n), (1.0, -1.0)), observers={"di": di_observer()},
            )  # fmt: skip
        else:
            mask = np.ones((self.trials, len(self.X)), bool)
            dpsgd.train_trials(self.model, self.X, self.y, mask, self.cfg, seed=0)
        return self.trials

    # Keras sides -----------------------------------------------------------------------------
    def keras_layers(self) -> list:
        out: list = [tf.keras.Input(self.model.input_shape)]
        for layer in self.model.layers:
            if isinstance(layer, models.Dense):
                out.append(
                    tf.keras.layers.Dense(
                        layer.units, activation=None if layer.activation == "linear" else "relu"
                    )
                )
            elif isinstance(layer, models.Conv2D):
                out.append(tf.keras.layers.Conv2D(layer.filters, layer.kernel, activation="relu"))
            elif isinstance(layer, models.MaxPool):
                out.append(tf.keras.layers.MaxPool2D(layer.size))
            else:
                out.append(tf.keras.layers.Flatten())
        return out

    def keras_loop(self, dp: bool) -> Callable[[], int]:
        """A compiled loop of ``steps`` train steps of one Keras model (DPSequential's own
        ``train_step`` with the fast-clipping registry when ``dp``)."""
        from tensorflow_privacy import DPSequential
        from tensorflow_privacy.privacy.fast_gradient_clipping import layer_registry

        cfg = self.cfg
        if dp:
            z = float(np.asarray(cfg.noise_multiplier))
            km = DPSequential(
                l2_norm_clip=cfg.clip_norm, noise_multiplier=z, use_xla=False,
                layer_registry=layer_registry.make_default_layer_registry(), layers=self.keras_layers(),
            )  # fmt: skip
        else:
            km = tf.keras.Sequential(self.keras_layers())
        km.compile(
            optimizer=tf.keras.optimizers.SGD(cfg.learning_rate),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        X, y = tf.constant(self.X), tf.constant(self.y)
        q = cfg.sampling_rate

        @tf.function
        def train(steps: tf.Tensor) -> None:
            for i in tf.range(steps):
                if q < 1.0:
                    keep = tf.random.stateless_uniform([len(self.X)], seed=[0, i]) < q
                    km.train_step((tf.boolean_mask(X, keep), tf.boolean_mask(y, keep)))
                else:
                    km.train_step((X, y))

        steps = tf.constant(cfg.steps)

        def run() -> int:
            for t in range(self.loop_models):
                km.set_weights([p[t] for p in self.init])
                train(steps)
            return self.loop_models

        return run

    # Batched no-DP floor --------------------------------------------------------------------------
    def floor(self) -> Callable[[], int]:
        model, cfg = self.model, self.cfg
        train = no_dp_loop(model, self.X, self.y, cfg.learning_rate)

        def run() -> int:
            params = [tf.constant(p[: self.floor_trials]) for p in self.init]
            [p.numpy() for p in train(params, tf.constant(cfg.steps))]
            return self.floor_trials

        return run


def workloads(quick: bool) -> tuple[list[Workload], str]:
    X, y = adult()
    mlp = models.model_for_dataset("adult", (X.shape[1],), 2)
    full = dpsgd.DPSGDConfig(ADULT_C, ADULT_Z, ADULT_LR, 30, noise_scale="local", normalizer=1000.0)
    pois = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 100, sampling_rate=0.1)
    Xm, ym, source = mnist100()
    cnn = models.model_for_dataset("mnist", (28, 28, 1), 10)
    conv = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 30)
    k = 4 if quick else 1
    return [
        Workload("adult_full", mlp, X[:1000], y[:1000], full, 1000 // k, 5, 1000 // k),
        Workload("adult_poisson", mlp, X[:2000], y[:2000], pois, 400 // k, 5, 0),
        Workload("mnist_cnn", cnn, Xm, ym, conv, 8 // (2 if quick else 1), 3, 8 // (2 if quick else 1)),
    ], source


def peak_rss_child(trials: int) -> None:
    """Train ``trials`` adult full-batch trials (the DI workload) and print peak RSS in MB."""
    X, y = adult()
    model = models.model_for_dataset("adult", (X.shape[1],), 2)
    cfg = dpsgd.DPSGDConfig(ADULT_C, ADULT_Z, ADULT_LR, 30, noise_scale="local", normalizer=1000.0)
    w = Workload("adult_full", model, X[:1000], y[:1000], cfg, trials, 1, 0)
    start = time.perf_counter()
    w.dpaudit()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    print(json.dumps({"trials": trials, "peak_rss_mb": rss, "seconds": time.perf_counter() - start}))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer trials (a quarter / half), 2 rounds, no RSS run"
    )
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--only", default=None, help="comma-separated workload prefixes (e.g. adult, mnist)")
    parser.add_argument("--rss-trials", type=int, default=4000)
    parser.add_argument("--rss-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    if args.rss_child is not None:
        peak_rss_child(args.rss_child)
        return
    rounds = args.rounds or (2 if args.quick else 3)
    loads, source = workloads(args.quick)
    if args.only:
        loads = [w for w in loads if any(w.name.startswith(p) for p in args.only.split(","))]
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset (TF's default for this CPU)")
    print(
        f"mnist images: {source}; cpu threads {os.cpu_count()}; TF_ENABLE_ONEDNN_OPTS={onednn}; "
        f"load average {os.getloadavg()}",
        flush=True,
    )
    methods: dict[str, dict[str, Callable[[], int]]] = {}
    for w in loads:
        methods[w.name] = {
            "dpaudit": w.dpaudit,
            "tfp_fast": w.keras_loop(True),
            "plain_tf": w.keras_loop(False),
        }
        if w.floor_trials:
            methods[w.name]["floor"] = w.floor()
    for name, ms in methods.items():  # warm-up: tracing and first-call costs, untimed
        for fn in ms.values():
            fn()
        print(f"warmed up {name}", flush=True)
    times: dict[str, dict[str, list[float]]] = {n: {m: [] for m in ms} for n, ms in methods.items()}
    for r in range(rounds):
        for name, ms in methods.items():
            for m, fn in ms.items():
                start = time.perf_counter()
                count = fn()
                times[name][m].append((time.perf_counter() - start) / count * 1e3)
        last = {n: {m: round(v[-1], 2) for m, v in d.items()} for n, d in times.items()}
        print(f"round {r + 1}: {json.dumps(last)}", flush=True)
    result: dict = {
        "mnist_source": source,
        "tf_enable_onednn_opts": onednn,
        "rounds": rounds,
        "load_average": os.getloadavg(),
        "ms_per_model": {},
    }
    print("\n| workload | method | min ms/model | median ms/model | TFP fast / method (median) |")
    print("| --- | --- | --- | --- | --- |")
    for name, d in times.items():
        ref = statistics.median(d["tfp_fast"])
        result["ms_per_model"][name] = {}
        for m, v in d.items():
            med = statistics.median(v)
            result["ms_per_model"][name][m] = {"min": min(v), "median": med, "all": v}
            print(f"| {name} | {m} | {min(v):.1f} | {med:.1f} | {ref / med:.2f}x |")
    med = {n: {m: statistics.median(v) for m, v in d.items()} for n, d in times.items()}
    # ratios of medians; targets: adult full ≥ 5 (≤ 1.25 over the floor), Poisson ≥ 4, CNN ≥ 3
    # (≤ 1.3 over plain TF)
    result["targets"] = {
        f"{n}_vs_tfp": m["tfp_fast"] / m["dpaudit"] for n, m in med.items()
    }
    result["targets"].update(
        {f"{n}_over_floor": m["dpaudit"] / m["floor"] for n, m in med.items() if "floor" in m}
    )
    if "mnist_cnn" in med:
        result["targets"]["mnist_cnn_over_plain_tf"] = (
            med["mnist_cnn"]["dpaudit"] / med["mnist_cnn"]["plain_tf"]
        )
    print(json.dumps(result["targets"], indent=1))
    if not args.quick:
        out = subprocess.run(
            [sys.executable, __file__, "--rss-child", str(args.rss_trials)],
            capture_output=True,
            text=True,
            check=True,
        )
        result["peak_rss"] = json.loads(out.stdout.strip().splitlines()[-1])
        print("peak RSS:", result["peak_rss"])
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
