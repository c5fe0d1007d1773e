"""``target-prepare@<name>``: the audited model's inputs as one prepared dataset.

The stage reads the base dataset's prepared rows (``data/prepared/<dataset>.npz``), the trained
``.keras`` file and the membership CSV, each verified against its DVC digest, and writes
``data/prepared/<name>.npz``: the base rows with D = the model's members, the evaluation set = its
non-members and the pool = every other row (the shadow models' data), plus the model's bytes and its
digests. Everything the audit reads is then in one DVC-tracked file, so a new model version (``dvc
add``) changes exactly this file and reruns exactly the stages of ``<name>-target``.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.data.custom import CustomDataError, verify_against_dvc
from dpaudit.data.prepared import PreparedData
from dpaudit.experiments.target.config import TargetModel
from dpaudit.io import atomic_path, open_npz, write_npz

#: Extra arrays of a target's prepared file, besides :class:`PreparedData`'s.
MODEL_KEYS = ("target_model", "target_model_md5", "target_model_sha256", "target_model_path",
              "target_membership_path", "target_membership_md5")


def read_membership(path: str | Path, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(members, nonmembers)`` row indices from a CSV with columns ``index`` and ``member``.

    Errors name the file: missing columns, indices that are not integers in ``0..rows-1`` or repeat,
    ``member`` values other than 1/0/true/false, fewer than 2 members or non-members.
    """
    path = Path(path)
    try:
        table = pd.read_csv(path, skipinitialspace=True)
    except pd.errors.EmptyDataError as exc:
        raise CustomDataError(f"{path}: the membership file is empty") from exc
    missing = [c for c in ("index", "member") if c not in table.columns]
    if missing:
        raise CustomDataError(
            f"{path}: no column {missing[0]!r}; a membership file has columns 'index' (row of the dataset, "
            f"0-based) and 'member' (1/0); columns present: {list(table.columns)}"
        )
    index = pd.to_numeric(table["index"], errors="coerce")
    bad = index.isna() | (index % 1 != 0) | (index < 0) | (index >= rows)
    if bad.any():
        position = int(np.flatnonzero(bad.to_numpy())[0])
        raise CustomDataError(
            f"{path}: 'index' {table['index'].iloc[position]!r} at row {position + 1} is not a row of the "
            f"dataset (integers 0..{rows - 1})"
        )
    index = index.astype(np.int64).to_numpy()
    if len(np.unique(index)) != len(index):
        raise CustomDataError(f"{path}: 'index' repeats a row")
    text = table["member"].astype(str).str.strip().str.lower()
    known = {"1": True, "true": True, "0": False, "false": False, "1.0": True, "0.0": False}
    unknown = ~text.isin(list(known))
    if unknown.any():
        position = int(np.flatnonzero(unknown.to_numpy())[0])
        raise CustomDataError(
            f"{path}: 'member' {table['member'].iloc[position]!r} at row {position + 1} must be 1/0 or "
            "true/false"
        )
    member = text.map(known).to_numpy(dtype=bool)
    members, nonmembers = np.sort(index[member]), np.sort(index[~member])
    if len(members) < 2 or len(nonmembers) < 2:
        raise CustomDataError(
            f"{path}: needs at least 2 members and 2 non-members, has {len(members)} and {len(nonmembers)}"
        )
    return members, nonmembers


def prepare_target(name: str, entry: TargetModel, base_prepared: Path, base_sensitivity: Path,
                   out_prepared: Path, out_sensitivity: Path) -> PreparedData:
    """Write the target's prepared file (and a copy of the base dataset's sensitivity result)."""
    if entry.model is None or entry.membership is None:
        raise ValueError(f"target.datasets.{name}: the pipeline needs 'model' and 'membership' files")
    from dpaudit.training.keras_import import model_from_keras_file

    model_md5 = verify_against_dvc(entry.model)
    membership_md5 = verify_against_dvc(entry.membership)
    mapped = model_from_keras_file(entry.model)
    base = PreparedData.load(base_prepared)
    if mapped.input_shape != base.input_shape or mapped.num_classes != base.num_classes:
        raise CustomDataError(
            f"{entry.model}: the model takes inputs {mapped.input_shape} with {mapped.num_classes} classes; "
            f"the prepared dataset {entry.dataset} has {base.input_shape} and {base.num_classes}: train the "
            f"model on data/prepared/{entry.dataset}.npz's features"
        )
    members, nonmembers = read_membership(entry.membership, len(base.X))
    both = np.intersect1d(members, nonmembers)
    used = np.union1d(members, nonmembers)
    pool = np.setdiff1d(np.arange(len(base.X)), used)
    if len(both) or len(pool) < 4:
        raise CustomDataError(
            f"{entry.membership}: leaves {len(pool)} rows of {entry.dataset} for the shadow models; "
            f"need at least 4 rows that are neither members nor non-members"
        )
    blob = Path(entry.model).read_bytes()
    prepared = PreparedData(name, base.kind, base.X, base.y, base.num_classes, base.feature_names,
                            members, pool, nonmembers)
    arrays = {
        "name": np.array(name), "kind": np.array(prepared.kind), "X": prepared.X, "y": prepared.y,
        "num_classes": np.array(prepared.num_classes, dtype=np.int64),
        "feature_names": np.array(prepared.feature_names, dtype=str),
        "train_idx": members, "pool_idx": pool, "eval_idx": nonmembers,
        "target_model": np.frombuffer(blob, dtype=np.uint8),
        "target_model_md5": np.array(model_md5),
        "target_model_sha256": np.array(hashlib.sha256(blob).hexdigest()),
        "target_model_path": np.array(str(entry.model)),
        "target_membership_path": np.array(str(entry.membership)),
        "target_membership_md5": np.array(membership_md5),
    }
    with atomic_path(out_sensitivity) as tmp:
        shutil.copyfile(base_sensitivity, tmp)
    write_npz(out_prepared, arrays)
    return prepared


def load_target_model(prepared_path: Path) -> dict[str, str | bytes] | None:
    """The model bytes and digests a target's prepared file carries; None for a plain dataset."""
    with open_npz(prepared_path) as f:
        if "target_model" not in f.files:
            return None
        return {
            "bytes": f["target_model"].tobytes(),
            **{k.removeprefix("target_"): str(f[k]) for k in MODEL_KEYS if k != "target_model"},
        }
