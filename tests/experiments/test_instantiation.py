"""Unit tests of the instantiation experiment (Nasr et al. 2021, issue 13's acceptance list).

Each runs in seconds on a tiny synthetic game; the contract test runs the whole pipeline
(``tests/experiments/test_contract.py`` with ``instantiation/smoke.yaml``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.attacks.gradient_canary import simulate_subsampled_gaussian_scores
from dpaudit.bounds.auditor import audit_scores
from dpaudit.bounds.empirical import cp_cap, epsilon_lower_from_counts
from dpaudit.bounds.tradeoff import SubsampledGaussian, gdp_epsilon
from dpaudit.config import ParamsError
from dpaudit.experiments.instantiation.config import TrainParams, config_from_params
from dpaudit.experiments.instantiation.design import balanced_inserted
from dpaudit.training.gradient_canary import canary_gradient

DELTA = 1e-5


@pytest.mark.parametrize(
    ("per_world", "cap"),
    [(100, 3.28), (250, 4.21), (500, 4.91), (1000, 5.60), (10_000, 7.90), (1_000_000, 12.51)],
)
def test_cp_cap_reproduces_the_spec(per_world: int, cap: float) -> None:
    assert cp_cap(per_world, DELTA, 0.95) == pytest.approx(cap, abs=0.006)


def test_balanced_worlds_have_exactly_n_trials_each() -> None:
    bits = balanced_inserted(37, [0, 1])
    assert bits.size == 74 and bits.sum() == 37


def test_warmup_steps_and_config_errors() -> None:
    assert TrainParams(steps=100).warmup_steps == 10
    assert TrainParams(steps=5).warmup_steps == 1
    with pytest.raises(ParamsError, match="instantiation.train.trials_per_world"):
        config_from_params({"instantiation": {"train": {"trials_per_world": 3}}})
    with pytest.raises(ParamsError, match="instantiation.train.threat_models"):
        config_from_params({"instantiation": {"train": {"threat_models": ["G"]}}})


def test_an_audit_specific_train_size_resizes_d_from_the_pool_and_keeps_them_disjoint() -> None:
    from dpaudit.experiments.instantiation.config import MIN_POOL_ROWS
    from dpaudit.experiments.instantiation.train import resize_train_set

    train, pool = np.arange(0, 100), np.arange(100, 1300)
    same_d, same_pool = resize_train_set(train, pool, None, [0, 4], "k")
    assert same_d is train and same_pool is pool
    grown_d, grown_pool = resize_train_set(train, pool, 500, [0, 4], "k")
    assert len(grown_d) == 500 and np.array_equal(grown_d[:100], train)
    assert len(grown_pool) == 800 and not set(grown_d) & set(grown_pool)
    assert set(grown_d) | set(grown_pool) == set(range(1300))
    again, _ = resize_train_set(train, pool, 500, [0, 4], "k")
    other, _ = resize_train_set(train, pool, 500, [1, 4], "k")
    assert np.array_equal(again, grown_d) and not np.array_equal(other, grown_d)
    small_d, small_pool = resize_train_set(train, pool, 40, [0, 4], "k")
    assert np.array_equal(small_d, train[:40]) and len(small_pool) == 1260
    most = 1300 - MIN_POOL_ROWS
    assert len(resize_train_set(train, pool, most, [0, 4], "k")[1]) == MIN_POOL_ROWS
    with pytest.raises(ValueError, match=r"instantiation.datasets.digits.train_size = 1201: .* at most 1200"):
        resize_train_set(train, pool, most + 1, [0, 4], "instantiation.datasets.digits.train_size")
    with pytest.raises(ParamsError, match="instantiation.datasets.digits.train_size"):
        config_from_params({"instantiation": {"datasets": {"digits": {"train_size": 1}}}})


# ------------------------------------------------------------------------------- a tiny game


@pytest.fixture(scope="module")
def game():
    from dpaudit.experiments.instantiation.design.game import Game
    from dpaudit.training.models import mlp

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5)).astype(np.float32)
    y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(np.int64)
    return Game(
        model=mlp("toy", 5, 2, [8]),
        X_d=X[:60],
        y_d=y[:60],
        X_pool=X[60:300],
        y_pool=y[60:300],
        X_eval=X[300:],
        y_eval=y[300:],
        lo=X.min(axis=0),
        hi=X.max(axis=0),
        sampling_rate=0.5,
        steps=6,
        clip_norm=1.0,
        learning_rate=0.5,
    )


def test_canary_gradient_has_norm_c_and_splits_into_parameters(game) -> None:
    from dpaudit.experiments.instantiation.design.game import _flat, _split_flat

    for size in (2, 20, 200):
        size = min(size, game.model.num_params)
        coords = np.random.default_rng(size).choice(game.model.num_params, size, replace=False)
        g = canary_gradient(game.model.num_params, coords, 1.7)
        assert np.linalg.norm(g) == pytest.approx(1.7, rel=1e-12)
    parts = _split_flat(game.model, g[None])
    assert [p.shape[1:] for p in parts] == list(game.model.param_shapes)
    np.testing.assert_allclose(_flat(parts)[0], g, rtol=1e-6)


def test_gradient_canary_without_noise_is_perfect_and_reaches_the_cp_cap(game) -> None:
    """E with (almost) no noise: every D′ trial scores above every D trial; the bound is the CP cap."""
    from dataclasses import replace

    from dpaudit.experiments.instantiation.design.crafters.canary import play_gradient_canary
    from dpaudit.experiments.instantiation.design.distinguishers import distinguisher3

    # The canary enters every step after t_o (q = 1), and feature 0 is 0 throughout D, so the data's
    # gradients vanish on the first-layer weights of that feature (flat coordinates 0..7): Crafter 4
    # picks them (zero update, lowest index), which is the paper's assumption.
    X_d = game.X_d.copy()
    X_d[:, 0] = 0.0
    full = replace(game, sampling_rate=1.0, X_d=X_d)
    n = 20
    inserted = balanced_inserted(n, [1])
    sizes = np.full(2 * n, 2)
    z = 1e-4
    view = play_gradient_canary(full, z, inserted, sizes, seed=3, warmup=1)
    scores, _ = distinguisher3(view["dots"], sizes, sampling_rate=1.0, noise_std=z, clip_norm=1.0)
    pos, neg = scores[inserted == 1], scores[inserted == 0]
    assert pos.min() > neg.max()
    perfect = epsilon_lower_from_counts(0, 0, n, n, DELTA, 0.95).epsilon_lower
    assert perfect == pytest.approx(cp_cap(n, DELTA, 0.95))
    naive = audit_scores(pos, neg, delta=DELTA, confidence=0.95).lower_bounds["sweep_naive"].epsilon
    assert naive == pytest.approx(cp_cap(n, DELTA, 0.95))


def test_static_poison_raises_the_mean_shadow_loss(game) -> None:
    from dpaudit.experiments.instantiation.design.crafters.poison import (
        craft_static_poison,
        train_shadow_models,
    )

    shadows, unused = train_shadow_models(game, 0.5, 4, seed=1)
    start = int(unused[0])
    x, history = craft_static_poison(
        game.model, shadows, game.X_pool[start], int(game.y_pool[start]), game.lo, game.hi, 10, 0.1
    )
    assert history[-1] > history[0]
    assert np.all(x >= game.lo - 1e-6) and np.all(x <= game.hi + 1e-6)
    final = float(np.mean(game.model.losses(shadows, x[None], np.array([int(game.y_pool[start])]))))
    start_loss = float(np.mean(game.model.losses(shadows, game.X_pool[start][None], game.y_pool[[start]])))
    assert final > start_loss


def test_adaptive_poison_lowers_the_query_loss_after_one_virtual_step(game) -> None:
    import tensorflow as tf

    from dpaudit.experiments.instantiation.design.crafters.poison import craft_adaptive_input

    model = game.model
    params = [tf.constant(p) for p in model.init(3, seed=5)]
    # move the biases off 0 so that the ReLUs pass gradients at x = 0
    params = [p + 0.1 if p.shape.rank == 2 else p for p in params]
    xq, yq = game.X_pool[:1], int(game.y_pool[0])
    x = craft_adaptive_input(model, params, tf.constant(xq), yq, game.lo, game.hi, 5, 1.0, 1.0)
    with tf.GradientTape() as tape:
        tape.watch(params)
        logits, _ = model.forward(params, x, shared=False)
        loss = tf.reduce_sum(model.example_losses(logits, tf.fill([3, 1], yq)))
    grads = tape.gradient(loss, params)
    virtual = [p - 1.0 * g for p, g in zip(params, grads, strict=True)]
    before = model.example_losses(model.forward(params, tf.constant(xq))[0], tf.constant([yq])).numpy()
    after = model.example_losses(model.forward(virtual, tf.constant(xq))[0], tf.constant([yq])).numpy()
    assert np.all(after < before)


def test_adaptive_poison_with_the_clipped_step_is_never_worse_than_the_query(game) -> None:
    """Crafter 3 from x_q with DP-SGD's clipped virtual step returns its best iterate: the query's loss
    after that step is at most what inserting x_q itself gives, per trial (so D's view is at least C's)."""
    import tensorflow as tf

    from dpaudit.experiments.instantiation.design.crafters.poison import craft_adaptive_input

    model = game.model
    params = [tf.constant(p) for p in model.init(4, seed=9)]
    xq, yq = game.X_pool[:1], int(game.y_pool[0])

    def after_step(x: tf.Tensor) -> np.ndarray:
        with tf.GradientTape() as tape:
            tape.watch(params)
            logits, _ = model.forward(params, x, shared=False)
            loss = tf.reduce_sum(model.example_losses(logits, tf.fill([4, 1], yq)))
        grads = tape.gradient(loss, params)
        norms = np.sqrt(sum(np.sum(np.reshape(g.numpy(), (4, -1)) ** 2, axis=1) for g in grads))
        scale = np.minimum(1.0, 0.5 / norms)
        virtual = [
            p - g * scale.reshape(-1, *[1] * (g.shape.rank - 1)) for p, g in zip(params, grads, strict=True)
        ]
        return (
            model.example_losses(model.forward(virtual, tf.constant(xq))[0], tf.constant([yq]))
            .numpy()
            .ravel()
        )

    query = tf.broadcast_to(tf.constant(xq)[None], (4, 1, *xq.shape[1:]))
    for step_size in (0.05, 5.0):  # small steps improve on x_q; huge ones would not, and are not kept
        x = craft_adaptive_input(
            model, params, tf.constant(xq), yq, game.lo, game.hi, 3, step_size, 1.0, "query", clip_norm=0.5
        )
        assert np.all(after_step(x) <= after_step(query) + 1e-6)


def test_distinguisher3_with_q1_approaches_the_gaussian_mechanism() -> None:
    """q = 1: the T-fold Gaussian is μ-GDP with μ = √T/z; the bound rises towards its exact ε with N."""
    steps, z = 4, 2.0
    exact = gdp_epsilon(math.sqrt(steps) / z, DELTA)
    found = []
    for n in (300, 30_000):
        s_d, s_dp = simulate_subsampled_gaussian_scores(
            n, sampling_rate=1.0, steps=steps, noise_multiplier=z, seed=n
        )
        family = SubsampledGaussian(1.0, steps)
        audit = audit_scores(s_dp, s_d, delta=DELTA, confidence=0.95, mechanism=family)
        found.append(audit.lower_bounds["subsampled_gaussian"].epsilon)
    assert found[0] < found[1] <= exact
    assert found[1] > 0.85 * exact


def _exp_run_params(recipe: str) -> dict:
    """params.yaml with the ``-S key=value`` / ``++key=value`` overrides of one README command applied."""
    import itertools
    import re
    import shlex
    from pathlib import Path

    import yaml

    from dpaudit.config import load_params

    params = load_params(Path(__file__).resolve().parents[2] / "params.yaml")
    words = shlex.split(recipe)
    for flag, arg in itertools.pairwise(words):
        if flag != "-S":
            continue
        key, value = re.sub(r"^\+\+", "", arg).split("=", 1)
        *parents, last = key.split(".")
        node = params
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = yaml.safe_load(value)
    return params


def _readme_recipe(name: str) -> str:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "recipes.md").read_text()
    start = readme.index(f"dvc exp run -n {name}")
    return readme[start : readme.index("\n```", start)].replace("\\\n", " ")


def test_readme_instantiation_recipes_pass_the_check_and_change_the_config() -> None:
    """The nasr-cpu and nasr-mnist recipes pass the check stage and really set what they claim."""
    from dpaudit.experiments import get_experiment
    from dpaudit.pipeline import check_params

    experiment = get_experiment("instantiation")
    default = experiment.config_from_params(_exp_run_params(""))
    cpu = _exp_run_params(_readme_recipe("nasr-cpu"))
    audits = {a.name for a in check_params(cpu)}
    assert {"adult-instantiation", "digits-instantiation"} <= audits
    config = experiment.config_from_params(cpu)
    assert config != default
    assert config.train.trials_per_world == 500 and config.train.target_epsilons == (1.0, 2.0, 4.0, 10.0)
    assert config.train.malicious_trials_per_world == 10_000
    assert config.attack.simulation_trials_per_world == 1_000_000
    assert (config.train.sampling_rate, config.train.steps, config.train.clip_norm) == (0.1, 100, 1.0)

    mnist = _exp_run_params(_readme_recipe("nasr-mnist"))
    assert "mnist-instantiation" in {a.name for a in check_params(mnist)}
    config = experiment.config_from_params(mnist)
    assert config.dataset("mnist").hidden == (16, 32, 64) and config.dataset("mnist").learning_rate == 0.15
    assert config.dataset("mnist").train_size == 1000 and default.dataset("mnist").train_size is None
    assert config.train.trials_per_world == 1000
    from dpaudit.training.modelling import build_model

    cnn = build_model("mnist", (28, 28, 1), 10, config.dataset("mnist").hidden)
    assert sum(1 for layer in cnn.layers if hasattr(layer, "param_shapes")) == 4  # the 4-layer CNN


def test_adaptive_input_starts_at_the_query_or_at_zero(game) -> None:
    """With no crafting steps Crafter 3 returns its start: x_q per trial (``query``) or 0 clipped to the
    input range (``zero``, the paper's); an unknown start is refused."""
    import tensorflow as tf

    from dpaudit.experiments.instantiation.design.crafters.poison import craft_adaptive_input

    params = [tf.constant(p) for p in game.model.init(2, seed=5)]
    xq = game.X_pool[:1]
    x = craft_adaptive_input(game.model, params, tf.constant(xq), 0, game.lo, game.hi, 0, 1.0, 1.0, "query")
    expected = np.broadcast_to(np.clip(xq, game.lo, game.hi), (2, 1, *xq.shape[1:]))
    np.testing.assert_allclose(x.numpy(), expected)
    x0 = craft_adaptive_input(game.model, params, tf.constant(xq), 0, game.lo, game.hi, 0, 1.0, 1.0, "zero")
    np.testing.assert_allclose(x0.numpy()[0, 0], np.clip(0.0, game.lo, game.hi))
    with pytest.raises(ValueError, match="start"):
        craft_adaptive_input(game.model, params, tf.constant(xq), 0, game.lo, game.hi, 1, 1.0, 1.0, "middle")


def _cell_table(threat_model: str, view: dict, loss: dict, q: float, steps: int, z: float = 1.0):
    """A cell's score sets (attack stage) audited as the bounds stage does, at 95 % with Bonferroni sweeps."""
    from dpaudit.experiments.instantiation.attack import cell_sets
    from dpaudit.experiments.instantiation.bounds import audit_sets, with_selection
    from dpaudit.experiments.instantiation.design import Cell

    cell = Cell(threat_model, 2.0, z)
    sets = cell_sets(cell, view, loss, sampling_rate=q, steps=steps, clip_norm=1.0, delta=DELTA, seed=0)
    sets = with_selection(sets, "bonferroni")
    return sets, audit_sets(sets, 0.95)


def _bound(table, estimator: str, attack: str) -> tuple[float, float, bool]:
    (row,) = (r for r in table.select("epsilon_lower", estimator=estimator) if f"attack={attack}" in r.group)
    return row.value, row.level, row.counted


def test_distinguisher2_audits_each_statistic_in_the_one_level_split() -> None:
    """C/D write max, mean and final loss as three score sets; every counted bound of the cell (the
    Bonferroni sweep and the family bound of each statistic: 6) runs at 1 − 0.05/6, so the largest holds
    at 95 % jointly. With only the final loss informative, that statistic's bound is the cell's."""
    from dpaudit.experiments.instantiation.design.distinguishers import distinguisher2_statistics

    rng = np.random.default_rng(4)
    n = 400
    inserted = balanced_inserted(n, [2])
    path = rng.normal(size=(2 * n, 6)) + 5.0
    path[:, -1] = rng.normal(size=2 * n) - 2.5 * inserted  # D′ trials end with a much lower loss
    stats = distinguisher2_statistics(path)
    np.testing.assert_array_equal(stats["final"], -path[:, -1])
    sets, table = _cell_table("C", {"inserted": inserted}, {"C-eps2__loss_path": path}, 1.0, 1)
    assert [s.group["attack"] for s in sets] == ["max_loss", "mean_loss", "final_loss"]
    share = 1 - 0.05 / 6
    mech = SubsampledGaussian(sampling_rate=1.0, steps=1, rtol=0.03, epsilon_discretization=1e-4)
    alone = audit_scores(
        stats["final"][inserted == 1], stats["final"][inserted == 0], delta=DELTA, confidence=0.95,
        mechanism=mech, headline=("sweep_bonferroni", "subsampled_gaussian"), counted_level=share, seed=0,
        fpr_levels=(0.01, 0.05),
    )  # fmt: skip
    sweep, level, counted = _bound(table, "sweep_bonferroni", "final_loss")
    assert sweep == pytest.approx(alone.lower_bounds["sweep_bonferroni"].epsilon)
    assert level == pytest.approx(share) and counted
    family, _, _ = _bound(table, "subsampled_gaussian", "final_loss")
    assert family == pytest.approx(alone.lower_bounds["subsampled_gaussian"].epsilon) and family > 0.5
    assert _bound(table, "sweep_split", "final_loss")[1:] == (0.95, False)  # reported, not counted
    best = table.headline()
    assert best.value == pytest.approx(family) and best.level == pytest.approx(0.95)
    (tpr,) = (r for r in table.select("tpr_at_fpr_0p01") if "final_loss" in r.group)
    assert tpr.value == alone.tpr_at_fpr[0.01][0]


def test_canaries_go_to_inert_coordinates_first_where_the_data_cannot_answer() -> None:
    """A feature that is 0 in every record makes its first-layer weights inert: no per-example gradient
    reaches them whatever the weights (checked against the model's own per-example gradients), so E's
    canary goes there first; a size that does not fit is filled by Crafter 4's smallest-update rule and
    flagged, and a convolution has no inert coordinates."""
    import tensorflow as tf

    from dpaudit.experiments.instantiation.design.crafters.canary import inert_coordinates, place_canaries
    from dpaudit.training.models import mlp

    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 5)).astype(np.float32)
    X[:, 2] = 0.0
    y = rng.integers(0, 2, size=50)
    model = mlp("toy", 5, 2, [8])
    inert = inert_coordinates(model, X)
    assert np.flatnonzero(inert).tolist() == list(range(16, 24))  # W1[2, :] of the 5 × 8 kernel
    params = [tf.constant(p) for p in model.init(1, seed=1)]
    with tf.GradientTape() as tape:
        tape.watch(params)
        logits = tf.reshape(model.forward(params, tf.constant(X))[0], (len(X), 2))
        loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
    kernel = tape.gradient(loss, params)[0].numpy()[0]
    assert np.all(kernel[2] == 0) and np.all(kernel[[0, 1, 3, 4]] != 0)

    abs_sum = rng.random((4, model.num_params))
    coords, all_inert = place_canaries(abs_sum, np.array([2, 2, 8, 20]), inert, "inert")
    assert all(set(c) <= set(range(16, 24)) for c in coords[:3])
    assert all_inert.tolist() == [True, True, True, False]
    assert set(range(16, 24)) <= set(coords[3])
    paper, flags = place_canaries(abs_sum, np.array([2, 2, 8, 20]), inert, "update")
    assert np.array_equal(paper[0], np.argsort(abs_sum[0], kind="stable")[:2]) and not flags.any()
    with pytest.raises(ValueError, match="canary_placement"):
        place_canaries(abs_sum, np.array([2, 2, 8, 20]), inert, "random")

    from dpaudit.training.modelling import build_model

    cnn = build_model("mnist", (28, 28, 1), 10, (4, 4, 4))
    assert not inert_coordinates(cnn, np.zeros((3, 28, 28, 1), np.float32)).any()
    from dpaudit.training.models import Dense, Flatten, MaxPool, Model

    images = np.zeros((3, 4, 4, 1), np.float32)
    images[:, 0, 0, 0] = 1.0  # 15 of 16 pixels are 0 everywhere
    flat = Model("flat", (4, 4, 1), 2, [Flatten(), Dense(2, "linear")])
    assert inert_coordinates(flat, images).sum() == 15 * 2
    pooled = Model("pooled", (4, 4, 1), 2, [MaxPool(2), Flatten(), Dense(2, "linear")])
    assert not inert_coordinates(pooled, images).any()  # pooled cells mix zero and non-zero pixels


def test_gradient_canary_cell_pools_every_size_into_the_per_step_family_bound() -> None:
    """E's cell: one score set per canary size (sweeps, one-threshold family bound, literal test), and
    the per-step family bound pooling every size's projections over the T − t_o observed steps. On the
    ideal mechanism (q = 0.1, 90 observed steps, z calibrated for ε = 4 over 100) it is ≤ ε of those 90
    steps and well above the one-threshold bound. Over every trial E reports it uncounted (its
    assumption fails under training); over the trials on inert coordinates it counts, baseline 0, as
    F's does (F, whose model does not move, counts the per-step bound over every trial)."""
    from dpaudit.bounds.accountants import calibrate_noise_multiplier, epsilon_pld

    q, steps, observed, n = 0.1, 100, 90, 400
    z = calibrate_noise_multiplier(4.0, DELTA, q, steps)
    rng = np.random.default_rng(8)
    sizes = np.repeat([2, 20], 2 * n)
    inserted = np.concatenate([balanced_inserted(n, [1, s]) for s in range(2)])
    dots = z * rng.standard_normal((4 * n, observed)) + inserted[:, None] * (
        rng.random((4 * n, observed)) < q
    )
    view = {"inserted": inserted, "canary_size": sizes, "dots": dots}
    sets, table = _cell_table("E", view, {}, q, steps, z)
    assert [s.group["attack"] for s in sets] == ["likelihood_ratio"] * 2 + ["stepwise_all"]
    assert sets[0].param("steps") == observed and sets[0].arrays["literal"].shape == (2 * n,)
    # Counted: per size the Bonferroni sweep, the family bound and the literal sweep (2 × 3).
    assert sum(r.counted for r in table.rows) == 6
    exact = epsilon_pld(z, q, observed, DELTA)
    every, level, counted = _bound(table, "stepwise_family", "stepwise_all")
    assert 0.5 * exact < every <= exact and level == 0.95 and not counted
    threshold = max(r.value for r in table.select("epsilon_lower", estimator="subsampled_gaussian"))
    assert every > threshold and table.headline().value == pytest.approx(threshold)
    # F plays the same trials on a frozen model: its per-step bound counts (7 counted bounds).
    _, as_f = _cell_table("F", view, {}, q, steps, z)
    f_bound, f_level, f_counted = _bound(as_f, "stepwise_family", "stepwise")
    assert f_counted and f_level == pytest.approx(1 - 0.05 / 7) and f_bound <= every
    # Canaries on inert coordinates (here size 2's trials): E counts the per-step bound of those alone,
    # with the known baseline 0 (as F's canary on coordinates of zero data mass).
    inert_sets, inert = _cell_table("E", {**view, "canary_inert": sizes == 2}, {}, q, steps, z)
    assert inert_sets[-1].group["attack"] == "stepwise_inert" and inert_sets[-1].member.size == 2 * n
    alone = {"inserted": inserted[sizes == 2], "canary_size": sizes[sizes == 2], "dots": dots[sizes == 2],
             "data_mass_at_canary": np.asarray(0.0)}  # fmt: skip
    _, only_2 = _cell_table("F", alone, {}, q, steps, z)
    bound, level, counted = _bound(inert, "stepwise_family", "stepwise_inert")
    assert counted and level == pytest.approx(1 - 0.05 / 7)
    assert only_2.select("epsilon_lower", estimator="stepwise_family")[0].level == pytest.approx(1 - 0.05 / 4)
    assert bound > threshold and 0.0 < bound <= exact
    assert _bound(inert, "stepwise_family", "stepwise_all")[0] == pytest.approx(every)


def test_crafter5_silences_features_so_the_canary_sees_no_data_gradient() -> None:
    """F's dataset zeroes ⌈2n/units⌉ input features of an MLP: Crafter 4 then finds 2n coordinates
    whose clipped data-gradient mass is exactly 0, the guarantee behind F's known-zero baseline; a CNN's
    dataset is left alone (a kernel is shared across positions)."""
    from dpaudit.experiments.instantiation.design.crafters.canary import (
        clipped_gradient_mass,
        silence_features,
    )
    from dpaudit.training.gradient_canary import smallest_update_coordinates
    from dpaudit.training.modelling import build_model
    from dpaudit.training.models import Dense, Model

    mlp = Model("mlp", (6,), 2, [Dense(3, "relu"), Dense(2, "linear")])
    rng = np.random.default_rng(0)
    X = rng.uniform(0.1, 1.0, (40, 6)).astype(np.float32)
    y = rng.integers(0, 2, 40)
    params0 = mlp.init(1, 3)
    assert clipped_gradient_mass(mlp, params0, X, y, 1.0).min() > 0  # before: every weight gets gradient
    silenced = silence_features(mlp, X, canary_size=4, seed=1)
    assert int(np.sum(np.all(silenced == 0, axis=0))) == 2  # ⌈4 / 3⌉ features
    mass = clipped_gradient_mass(mlp, params0, silenced, y, 1.0)
    coords = smallest_update_coordinates(mass[None], 4)[0]
    assert mass[coords].sum() == 0.0
    cnn = build_model("mnist", (28, 28, 1), 10, (4, 4, 4))
    images = rng.uniform(size=(2, 28, 28, 1)).astype(np.float32)
    np.testing.assert_array_equal(silence_features(cnn, images, 2, 0), images)


def test_the_registry_reads_like_table_one_and_drives_the_names_and_the_config() -> None:
    """Table I (Nasr et al.): crafter and distinguisher per threat model, weakest first; the report's
    names, the config's accepted keys and the strongest-threat-model rule all come from that table."""
    import typing

    from dpaudit.experiments.instantiation.config import ThreatModel
    from dpaudit.experiments.instantiation.design import NAMES
    from dpaudit.experiments.instantiation.design.registry import ORDER, REGISTRY, strongest

    assert ORDER == ("A", "B", "C", "D", "E", "F")
    assert [REGISTRY[k].crafter for k in ORDER] == [1, 2, 2, 3, 4, 5]
    assert [REGISTRY[k].distinguisher for k in ORDER] == [1, 1, 2, 2, 3, 3]
    assert [REGISTRY[k].protocol for k in ORDER] == [1, 1, 2, 3, 4, 4]
    assert NAMES["A"] == "API access (§IV-A)" and NAMES["F"] == "malicious dataset (§IV-F)"
    assert REGISTRY["C"].trials_key == "B" and REGISTRY["B"].trials_key == "B"
    assert [k for k in ORDER if REGISTRY[k].uses_poison] == ["B", "C", "D"]
    assert [k for k in ORDER if not REGISTRY[k].trains_on_real_data] == ["F"]
    assert [k for k in ORDER if REGISTRY[k].frozen_model] == ["F"]
    assert [k for k in ORDER if REGISTRY[k].simulated] == ["F"]
    assert typing.get_args(ThreatModel) == ORDER
    assert strongest(["C", "A", "E"]) == "E" and strongest(["B"]) == "B"


def test_threat_models_sharing_trials_play_once_and_write_both_views(game, tmp_path, monkeypatch) -> None:
    """The train stage reads the registry: B and C (C plays B's trials) play once with B's seed and both
    views are written, in whatever order the config lists them; A plays its own trials."""
    from dataclasses import replace

    from dpaudit.experiments.instantiation import train as train_stage
    from dpaudit.experiments.instantiation.design.crafters import poison
    from dpaudit.experiments.instantiation.design.registry import REGISTRY
    from dpaudit.layout import Audit

    played: list[tuple[str, int]] = []

    def fake(key: str):
        def play(p):
            played.append((key, p.seed))
            return {"inserted": p.inserted(), "seed": np.asarray(p.seed), "poison": np.asarray(p.poison[0])}

        return play

    table = {k: replace(tm, play=fake(tm.trials_key)) for k, tm in REGISTRY.items()}
    monkeypatch.setattr(train_stage, "REGISTRY", table)
    monkeypatch.setattr(train_stage, "build_game", lambda config, audit: game)
    monkeypatch.setattr(poison, "train_shadow_models", lambda g, z, n, seed: ([], np.arange(3)))
    monkeypatch.setattr(poison, "craft_static_poison", lambda *a: (np.zeros(5, np.float32), np.zeros(1)))
    train = {"threat_models": ["C", "A", "B"], "trials_per_world": 10}
    config = config_from_params({"instantiation": {"train": train, "datasets": {"adult": {}}}})
    audit = Audit("adult", "instantiation", tmp_path)
    manifest = train_stage.train(config, audit, tmp_path / "train")
    seed_b = train_stage.cell_seed(0, "adult", "B", 2.0)
    assert played == [("B", seed_b), ("A", train_stage.cell_seed(0, "adult", "A", 2.0))]
    with np.load(tmp_path / "train" / "B-eps2.npz") as b, np.load(tmp_path / "train" / "C-eps2.npz") as c:
        assert int(b["seed"]) == int(c["seed"]) == seed_b
        assert np.array_equal(b["inserted"], c["inserted"]) and b["inserted"].sum() == 10
    assert set(manifest.facts["cell_trials"]) == {"A-eps2", "B-eps2", "C-eps2"}
