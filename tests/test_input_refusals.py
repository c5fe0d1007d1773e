"""Hostile inputs the ``check`` stage and the readers refuse, each naming the file (and the key):

- a file or directory under ``models/`` that is a symbolic link out of the repository;
- a Keras file outside the allow-list, refused by ``check`` already (not only by ``train``); the
  inspection reads the file's config and loads no TensorFlow;
- an ``.npz`` file holding pickled Python objects, or a pickle instead of an archive;
- an output directory that is a symbolic link (the atomic writer replaces it whole).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from dpaudit.config import ParamsError, load_params
from dpaudit.data.custom import CustomDataError, CustomDatasetSpec, load_custom
from dpaudit.data.prepared import PreparedData
from dpaudit.io import atomic_directory
from dpaudit.pipeline.check import validate
from dpaudit.scores import read_score_sets
from dpaudit.training.keras_safety import UnsafeKerasConfigError

REPO = Path(__file__).resolve().parents[1]
CHECK_SCRIPT = REPO / "stages" / "check.py"
KEY = "identifiability.datasets.digits.model.keras"


def _params(keras: str | None = None) -> dict:
    params = copy.deepcopy(load_params(REPO / "params.yaml"))
    # the check runs in a folder of its own, without examples/ (where the training audit's function lives)
    params["audits"].pop("digits-training_audit", None)
    if keras is not None:
        params["identifiability"]["datasets"]["digits"] = {"hidden": [8], "model": {"keras": keras}}
    return params


def _config(unsafe: bool = False) -> dict:
    """A Sequential config as Keras writes it (64 inputs, 10 classes); ``unsafe`` adds a Lambda layer."""
    def layer(cls: str, **config: object) -> dict:
        return {"module": "keras.layers", "class_name": cls, "registered_name": None, "config": config}

    layers = [layer("InputLayer", name="in", batch_input_shape=[None, 64]),
              layer("Dense", name="d", units=10, activation="softmax")]
    if unsafe:
        layers.insert(1, layer("Lambda", name="code", function=["payload", None, None]))
    return {"module": "keras", "class_name": "Sequential", "registered_name": None,
            "config": {"name": "s", "layers": layers}}


def _keras(path: Path, config: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps(config))
        archive.writestr("metadata.json", json.dumps({"keras_version": "3.0.0"}))
    return path


# ------------------------------------------------------------------- models/: links out of the repo


def test_check_refuses_a_model_file_linked_from_outside_the_repository(tmp_path, monkeypatch):
    repo, outside = tmp_path / "repo", tmp_path / "elsewhere"
    target = _keras(outside / "arch.keras", _config())
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "arch.keras").symlink_to(target)
    monkeypatch.chdir(repo)
    with pytest.raises(ParamsError, match=rf"'{KEY}' = 'models/arch\.keras' is invalid: "
                       rf"models/arch\.keras is a symbolic link to {target}.*outside the repository"):
        validate(_params("models/arch.keras"))
    os.remove("models/arch.keras")
    _keras(repo / "models" / "arch.keras", _config())  # a real file passes
    validate(_params("models/arch.keras"))


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_check_refuses_any_link_under_models_that_leaves_the_repository(tmp_path, monkeypatch, kind):
    repo, outside = tmp_path / "repo", tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "notes.txt").write_text("not part of the project")
    (repo / "models" / "sub").mkdir(parents=True)
    target = outside / "notes.txt" if kind == "file" else outside
    (repo / "models" / "sub" / "linked").symlink_to(target)
    (repo / "inside.txt").write_text("x")
    (repo / "models" / "ok").symlink_to(repo / "inside.txt")  # a link within the repository is fine
    monkeypatch.chdir(repo)
    with pytest.raises(ValueError, match=rf"models/sub/linked is a symbolic link to {target}, which resolves "
                       rf"to {target.resolve()}, outside the repository: every file under models/"):
        validate(_params())
    os.remove("models/sub/linked")
    validate(_params())


def test_a_link_into_the_configured_dvc_cache_is_accepted(tmp_path, monkeypatch):
    """``dvc add`` with the symlink link type and a shared cache outside the repository links there."""
    repo, cache = tmp_path / "repo", tmp_path / "shared-cache"
    stored = _keras(cache / "files" / "md5" / "ab" / "cdef", _config())
    (repo / ".dvc").mkdir(parents=True)
    (repo / ".dvc" / "config").write_text(f"[cache]\n    dir = {cache}\n    type = symlink\n")
    (repo / "models").mkdir()
    (repo / "models" / "arch.keras").symlink_to(stored)
    monkeypatch.chdir(repo)
    validate(_params("models/arch.keras"))


# ---------------------------------------------------------------- check runs train's Keras allow-list


def test_check_refuses_an_unsafe_keras_file_naming_key_file_and_reason(tmp_path):
    """The real check stage: exit 1 before any training, naming the key, the file and the reason."""
    _keras(tmp_path / "models" / "arch.keras", _config(unsafe=True))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(_params("models/arch.keras"), sort_keys=False))
    env = {**os.environ, "DPAUDIT_PROGRESS": "0", "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, str(CHECK_SCRIPT)], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    log = done.stdout + done.stderr
    assert done.returncode == 1, log
    assert (f"'{KEY}' = 'models/arch.keras': models/arch.keras: config.config.layers[1].class_name = "
            "'Lambda' is not allowed (a layer that carries Python code)") in log, log
    assert not (tmp_path / "data" / "check" / "params.ok").exists()


def test_the_keras_inspection_of_check_needs_no_tensorflow(tmp_path):
    """check reads the file's config as JSON: Keras (and TensorFlow) never load for the inspection."""
    _keras(tmp_path / "models" / "arch.keras", _config(unsafe=True))
    probe = (
        "import sys\n"
        "from dpaudit.layout import Audit\n"
        "from dpaudit.pipeline.check import model_records\n"
        "model = {'hidden': [8], 'model': {'keras': 'models/arch.keras'}}\n"
        "params = {'identifiability': {'datasets': {'digits': model}}}\n"
        "try:\n"
        "    model_records(params, [Audit('digits', 'identifiability')])\n"
        "except ValueError as exc:\n"
        "    print('refused:', exc)\n"
        "print('loaded:', sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    assert "refused:" in done.stdout and "'Lambda' is not allowed" in done.stdout, done.stdout + done.stderr
    assert "loaded: []" in done.stdout, done.stdout + done.stderr


def test_check_refuses_an_unsafe_model_json_naming_the_file(tmp_path, monkeypatch):
    config = _config()
    config["config"]["layers"][1]["config"]["kernel_initializer"] = {
        "module": "os", "class_name": "system", "config": {}, "registered_name": None}
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "arch.json").write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsafeKerasConfigError, match=r"models/arch\.json: config\.config\.layers\[1\]\.config"
                       r"\.kernel_initializer\.module = 'os' is not allowed"):
        validate(_params("models/arch.json"))


# ------------------------------------------------------------------------------ pickles in npz files


def test_an_object_array_is_refused_naming_the_file_and_the_array(tmp_path):
    path = tmp_path / "digits.npz"
    np.savez(path, name=np.array(["digits", None], dtype=object))
    with pytest.raises(ValueError, match=r"digits\.npz: array 'name' holds Python objects, which dpaudit "
                       r"never unpickles"):
        PreparedData.load(path)
    from dpaudit.io import open_npz

    with open_npz(path) as f, pytest.raises(KeyError, match=r"digits\.npz: no array 'X' \(arrays present"):
        f["X"]


def test_a_pickle_instead_of_an_npz_archive_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "scores.npz"
    path.write_bytes(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94.")  # pickle.dumps({})
    with pytest.raises(ValueError, match=r"scores\.npz: cannot read as an \.npz archive: .*pickled data"):
        read_score_sets(path)


def test_a_custom_npz_with_object_features_names_the_file_and_the_params_key(tmp_path):
    path = tmp_path / "mine.npz"
    np.savez(path, features=np.array([[1.0, None]] * 20, dtype=object), labels=np.arange(20) % 2)
    spec = CustomDatasetSpec(path=str(path), label="labels", train_size=5, eval_size=5, name="mine")
    with pytest.raises(CustomDataError, match=r"mine\.npz: array 'features' holds Python objects.*"
                       r"'data\.custom\.mine\.features' = 'features'"):
        load_custom(spec)


# ------------------------------------------------------------------------ a linked output directory


def test_a_linked_output_directory_is_refused_naming_it_and_its_target(tmp_path):
    real = tmp_path / "kept"
    real.mkdir()
    (real / "a.csv").write_text("1")
    link = tmp_path / "plots"
    link.symlink_to(real)
    with pytest.raises(ValueError, match=rf"{link} is a symbolic link to {real}; this output directory is "
                       r"replaced whole"), atomic_directory(link) as tmp:
        (tmp / "b.csv").write_text("2")
    assert link.is_symlink() and (real / "a.csv").read_text() == "1"


def test_an_interrupt_while_replacing_a_directory_keeps_the_previous_version(tmp_path, monkeypatch):
    dest = tmp_path / "plots"
    dest.mkdir()
    (dest / "old.csv").write_text("old")
    real_replace, fired = os.replace, []

    def interrupted(src: object, dst: object) -> None:
        if Path(str(dst)) == dest and not fired:  # the new version moving in: Ctrl-C arrives
            fired.append(src)
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr("dpaudit.io.os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt), atomic_directory(dest) as tmp:
        (tmp / "new.csv").write_text("new")
    assert fired and sorted(p.name for p in tmp_path.iterdir()) == ["plots"]  # no temporary left
    assert [p.name for p in dest.iterdir()] == ["old.csv"]
