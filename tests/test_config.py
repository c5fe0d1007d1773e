"""The typed params loader: every error names the key path and the offending value."""

from dataclasses import dataclass, field
from typing import Literal

import pytest

from dpaudit.config import ParamsError, from_mapping, load_params, require
from dpaudit.pipeline import audit_from_params


@dataclass(frozen=True)
class Inner:
    size: int
    rate: float = 0.5

    def __post_init__(self) -> None:
        require(self.size > 0, "size", self.size, "must be positive")


@dataclass(frozen=True)
class Outer:
    name: Literal["adult", "digits"]
    inner: Inner
    values: tuple[float, ...] = ()
    per: dict[str, Inner] = field(default_factory=dict)
    optional: int | None = None


def test_builds_nested_and_converts_types():
    cfg = from_mapping(
        Outer, {"name": "adult", "inner": {"size": 3}, "values": [1, 2.5], "per": {"x": {"size": 1}}}, "top"
    )
    assert cfg.inner == Inner(size=3, rate=0.5)
    assert cfg.values == (1.0, 2.5) and isinstance(cfg.values[0], float)
    assert cfg.per["x"].size == 1
    assert cfg.optional is None


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"name": "adult", "inner": {"size": 3}, "sizee": 1}, "unknown key 'top.sizee'"),
        ({"name": "mnist", "inner": {"size": 3}}, "'top.name' = 'mnist'"),
        ({"name": "adult", "inner": {"size": "3"}}, "'top.inner.size' = '3' must be an integer"),
        ({"name": "adult", "inner": {"size": True}}, "'top.inner.size' = True must be an integer"),
        ({"name": "adult", "inner": {"size": -1}}, "'top.inner.size' = -1 is invalid: must be positive"),
        ({"name": "adult"}, "missing key 'top.inner'"),
        (
            {"name": "adult", "inner": {"size": 1}, "values": [1, "a"]},
            "'top.values[1]' = 'a' must be a number",
        ),
        (
            {"name": "adult", "inner": {"size": 1}, "per": {"x": {"size": 0}}},
            "'top.per.x.size' = 0 is invalid",
        ),
        (
            {"name": "adult", "inner": {"size": 1, "rate": float("nan")}},
            "'top.inner.rate' = nan must be a finite",
        ),
        (
            {"name": "adult", "inner": {"size": 1, "rate": float("inf")}},
            "'top.inner.rate' = inf must be a finite",
        ),
        (
            {"name": "adult", "inner": {"size": 1}, "values": [-float("inf")]},
            "'top.values[0]' = -inf must be a",
        ),
    ],
)
def test_errors_name_key_and_value(mapping, message):
    with pytest.raises(ParamsError, match=message.replace("[", r"\[").replace("]", r"\]")):
        from_mapping(Outer, mapping, "top")


def test_load_params_errors_name_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ParamsError, match="nope.yaml does not exist"):
        load_params(missing)
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ParamsError, match="bad.yaml must hold a mapping"):
        load_params(bad)


def test_audit_lookup_validates_entries():
    params = {
        "data": {"datasets": ["adult"]},
        "audits": {
            "adult-identifiability": {"dataset": "adult", "experiment": "identifiability"},
            "adult-typo": {"dataset": "adult", "experiment": "identifyability"},
            "digits-membership": {"dataset": "digits", "experiment": "membership"},
            "my-audit": {"dataset": "adult", "experiment": "membership"},
            "../escape": {"dataset": "adult", "experiment": "membership"},
        },
    }
    audit = audit_from_params(params, "adult-identifiability")
    assert str(audit.train_dir) == "data/train/adult/identifiability"
    assert str(audit.results_path) == "results/adult-identifiability.json"
    with pytest.raises(ParamsError, match="'audits.adult-typo.experiment' = 'identifyability'"):
        audit_from_params(params, "adult-typo")
    with pytest.raises(ParamsError, match=r"'audits.digits-membership.dataset' = 'digits'.*data.datasets"):
        audit_from_params(params, "digits-membership")
    with pytest.raises(ParamsError, match="audit 'mnist-x' is not listed"):
        audit_from_params(params, "mnist-x")
    with pytest.raises(
        ParamsError, match=r"'audits.my-audit' = 'my-audit'.*<dataset>-<experiment>.*adult-membership"
    ):
        audit_from_params(params, "my-audit")
    with pytest.raises(ParamsError, match=r"'audits.../escape' = '../escape'.*<dataset>-<experiment>"):
        audit_from_params(params, "../escape")


def test_repository_params_file_is_valid():
    """The committed params.yaml passes the check stage's validation, and runs the four default audits."""
    from pathlib import Path

    from dpaudit.pipeline import check_params

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    names = {audit.name for audit in check_params(params)}
    assert {
        "adult-identifiability",
        "adult-membership",
        "digits-identifiability",
        "digits-membership",
        "adult-instantiation",
        "digits-instantiation",
    } <= names


def test_params_yaml_repeats_the_config_defaults():
    """One source of defaults: every train/attack/bounds value in params.yaml equals its dataclass default."""
    from pathlib import Path

    from dpaudit.experiments import registry

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    for name, experiment in registry().items():
        stripped = {name: {"datasets": params[name]["datasets"]}}
        assert experiment.config_from_params(params) == experiment.config_from_params(stripped), name


def _exp_run_params(recipe: str) -> dict:
    """params.yaml with the ``-S key=value`` (and ``++key=value``) overrides of one README command applied."""
    import re
    import shlex
    from pathlib import Path

    import yaml

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    for flag, arg in zip(shlex.split(recipe)[:-1], shlex.split(recipe)[1:], strict=True):
        if flag != "-S":
            continue
        key, value = re.sub(r"^\+\+", "", arg).split("=", 1)
        *parents, last = key.split(".")
        node = params
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = yaml.safe_load(value)
    return params


def test_readme_paper_scale_recipe_really_runs_1000_trials_everywhere():
    """The README's Bernau recipe passes the check and trains 1000 trials per setting on every dataset."""
    from pathlib import Path

    from dpaudit.experiments import get_experiment
    from dpaudit.pipeline import check_params

    readme = (Path(__file__).resolve().parents[1] / "docs" / "recipes.md").read_text()
    start = readme.index("dvc exp run -n bernau-paper")
    recipe = readme[start : readme.index("\n\n", start)].replace("\\\n", " ")
    params = _exp_run_params(recipe)
    audits = [a.name for a in check_params(params)]
    assert "mnist-identifiability" in audits and "purchase100-identifiability" in audits
    config = get_experiment("identifiability").config_from_params(params)
    for audit in audits:
        dataset, experiment = audit.split("-", 1)
        if experiment == "identifiability":
            assert 2 * config.trials_for(dataset) == 1000, dataset  # trials counts per world
    assert config.train.candidate_trials == 250 and config.train.epochs == 30


def test_readme_membership_recipe_passes_the_check():
    from pathlib import Path

    from dpaudit.pipeline import check_params

    readme = (Path(__file__).resolve().parents[1] / "docs" / "recipes.md").read_text()
    start = readme.index("dvc exp run -n membership-paper")
    params = _exp_run_params(readme[start : readme.index("\n```", start)].replace("\\\n", " "))
    assert sum(a.experiment == "membership" for a in check_params(params)) == 5
    assert params["membership"]["train"]["repeats"] == 10


def test_dataset_entry_names_the_missing_key_and_the_known_datasets() -> None:
    from dpaudit.config import dataset_entry
    from dpaudit.experiments.canaries.config import config_from_params as canaries_config

    assert dataset_entry({"adult": 1, "digits": 2}, "membership", "digits") == 2
    expected = r"missing key 'membership\.datasets\.mnist' \(have: adult, digits\)"
    with pytest.raises(ParamsError, match=expected):
        dataset_entry({"digits": 2, "adult": 1}, "membership", "mnist")
    config = canaries_config(load_params("params.yaml"))
    with pytest.raises(ParamsError, match=r"missing key 'canaries\.datasets\.nope'"):
        config.settings_for("nope")
