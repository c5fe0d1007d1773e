"""The audit set and the membership design of the canaries experiment (Aerni et al. §3–4).

Aerni et al. (:data:`dpaudit.references.AERNI`) audit a defence on an *audit set* of canaries: each
canary is in exactly half of M models, every other record is in all of them, and each model in turn
is the target while the other M − 1 are its shadows (LiRA, Carlini et al. 2022, arXiv 2112.03570,
leave-one-out). This module draws that design from a seed:

- :func:`build_audit_set`: ``base`` always-in records and K canaries of the types of
  :data:`~dpaudit.experiments.canaries.config.CANARY_TYPES` — mislabeled (the label moved to another
  class), blank (a constant input, a random label), out-of-distribution (uniform-noise inputs with
  random labels, or inverted inputs 1 − x with their labels), duplicates (a clean record repeated r
  times, one canary), mislabeled duplicates (a mislabeled record repeated r times: it survives a
  distillation defence that hides each copy from some teachers, as the other copies still teach the
  wrong label) and clean (unmodified records, the population-style view).
- :func:`balanced_membership`: the boolean ``[K, M]`` design, each row exactly M/2 true.
- the defences audited (:data:`DEFENCE_KINDS`, :func:`defences_for`, the published heuristics of
  :data:`HEURISTICS`), the attacks' names and the files the stages exchange.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpaudit.experiments.canaries.config import CANARY_TYPES, DatasetSettings
from dpaudit.io import open_npz, write_npz
from dpaudit.training.defences import DefenceKind, defence_kinds

__all__ = [
    "DEFENCE_KINDS",
    "DESIGN_FILE",
    "HEURISTICS",
    "LABEL_ONLY",
    "REFERENCE_ATTACKS",
    "THRESHOLD_ATTACK",
    "AuditSet",
    "Defence",
    "Heuristic",
    "balanced_membership",
    "build_audit_set",
    "dataset_seed",
    "defences_for",
    "load_audit_set",
    "query_augmentations",
]

DESIGN_FILE = "design.npz"

#: The label-only likelihood-ratio attack (:mod:`dpaudit.attacks.label_only`).
LABEL_ONLY = "label_only"
#: The population-level attack the published heuristics were evaluated with: one global threshold on
#: the released confidence of the record (the metric-based attacks of Song & Mittal 2021).
THRESHOLD_ATTACK = "threshold_confidence"
#: RMIA and LiRA on the same few reference models: (mode, number of reference models).
REFERENCE_ATTACKS = (("offline", 1), ("online", 4))


@dataclass(frozen=True)
class Defence:
    """One audited defence: its name, the weights it uses, and (DP-SGD only) its noise multiplier.

    ``undefended``: non-private SGD; ``dpsgd``: DP-SGD at one noise multiplier (the utility-first
    setting is one of them); ``heuristic``: the undefended models releasing only their top-1 label,
    a defence that hides confidence (Aerni et al. §5); ``relaxloss``, ``selena`` and ``hamp``: the published
    heuristic defences of :data:`HEURISTICS`, trained by :mod:`dpaudit.training.heuristics`.
    """

    name: str
    kind: str  # a key of DEFENCE_KINDS: "undefended" | "dpsgd" | "heuristic" | "relaxloss" | "selena"
    weights: str  # which trained group's weights it releases
    noise_multiplier: float | None = None
    label: str = ""

    @property
    def spec(self) -> DefenceKind:
        """What the stages need to know about this defence's kind (:data:`DEFENCE_KINDS`)."""
        return DEFENCE_KINDS[self.kind]


#: The audited kinds of defence and how the stages treat each one.
DEFENCE_KINDS = defence_kinds(
    DefenceKind("undefended", "non-private SGD"),
    DefenceKind("dpsgd", "DP-SGD at one noise multiplier", private=True),
    DefenceKind("heuristic", "the undefended models releasing only their top-1 label", label_only=True),
    DefenceKind("relaxloss", "RelaxLoss: the loss held at a target (Chen et al. 2022)", heuristic=True),
    DefenceKind("selena", "SELENA: Split-AI and self-distillation (Tang et al. 2022)", heuristic=True),
    DefenceKind("hamp", "HAMP: high-entropy labels, outputs of random inputs (Chen & Pattabiraman 2024)",
                heuristic=True),
)


@dataclass(frozen=True)
class Heuristic:
    """A published heuristic defence and how it is evaluated.

    ``published_attack``: the population-level attack of the defence's own evaluation (a score set's
    attack name); ``canary_types``: the canaries chosen *for this defence* (Aerni et al.: which
    canaries work depends on the defence); ``citation``: the paper.
    """

    name: str
    label: str
    citation: str
    published_attack: str
    canary_types: tuple[str, ...]


#: The heuristic defences by name. Both papers evaluate with metric-based attacks that threshold
#: one global confidence over the population (Song & Mittal 2021), ``threshold_confidence`` here.
#: RelaxLoss flattens the loss of members towards α, which leaves a mislabeled or out-of-distribution
#: record's loss far from a non-member's; SELENA labels each record by teachers that never saw it, so
#: a single mislabeled record is relabelled correctly and only a repeated one survives into the student.
#: HAMP releases the confidences of random inputs, but in the query's class ranking: the top-1 label
#: still shows a memorised wrong label, so the label-only test on mislabeled canaries is its adaptive
#: attack.
HEURISTICS: dict[str, Heuristic] = {
    "relaxloss": Heuristic(
        "relaxloss", "RelaxLoss", "Chen, Yu & Fritz, ICLR 2022", "threshold_confidence",
        ("mislabeled", "blank", "ood", "mislabeled_duplicates"),
    ),
    "selena": Heuristic(
        "selena", "SELENA", "Tang et al., USENIX Security 2022", "threshold_confidence",
        ("mislabeled_duplicates", "duplicates", "ood"),
    ),
    "hamp": Heuristic(
        "hamp", "HAMP", "Chen & Pattabiraman, NDSS 2024", "threshold_confidence",
        ("mislabeled", "ood", "mislabeled_duplicates"),
    ),
}  # fmt: skip


def defences_for(
    noise_multipliers: list[float], utility_first: float | None, heuristics: tuple[str, ...] = ()
) -> list[Defence]:
    """The defences of one audit in report order (undefended, DP-SGD by falling z, the top-1-label
    heuristic, the published heuristics)."""
    out = [Defence("undefended", "undefended", "undefended", None, "undefended (SGD)")]
    for z in sorted(noise_multipliers, reverse=True):
        out.append(Defence(f"dpsgd-z{z:g}", "dpsgd", f"dpsgd-z{z:g}", float(z), f"DP-SGD z={z:g}"))
    if utility_first is not None:
        out.append(
            Defence(
                "dpsgd-utility",
                "dpsgd",
                "dpsgd-utility",
                float(utility_first),
                f"DP-SGD utility-first z={utility_first:g}",
            )
        )
    out.append(Defence("label-only", "heuristic", "undefended", None, "top-1 label only (heuristic)"))
    out += [Defence(h, h, h, None, HEURISTICS[h].label) for h in heuristics]
    return out


def dataset_seed(seed: int, dataset: str) -> int:
    """A stable per-dataset seed (independent of Python's randomised ``hash``)."""
    return (int(seed) * 1_000_003 + zlib.crc32(dataset.encode())) % (2**31 - 1)


def balanced_membership(canaries: int, models: int, rng: np.random.Generator) -> np.ndarray:
    """``[K, M]`` booleans with exactly M/2 true per row (each canary in half of the models)."""
    if models % 2:
        raise ValueError(f"models must be even, got {models}")
    row = np.zeros(models, bool)
    row[: models // 2] = True
    return (
        np.stack([rng.permutation(row) for _ in range(canaries)]) if canaries else np.zeros((0, models), bool)
    )


@dataclass(frozen=True)
class AuditSet:
    """Base records, canaries and the design.

    ``base_x``/``base_y``: the always-in records; ``canary_x``/``canary_y``: each canary's input and
    assigned label (what it is trained with and queried on); ``canary_type``: index into
    :data:`CANARY_TYPES`; ``copies``: how many times each canary is in a training set when in;
    ``source``: the prepared row a canary was made from (−1 for synthetic inputs);
    ``membership``: ``[K, M]``.
    """

    base_x: np.ndarray
    base_y: np.ndarray
    canary_x: np.ndarray
    canary_y: np.ndarray
    canary_type: np.ndarray
    copies: np.ndarray
    source: np.ndarray
    membership: np.ndarray

    def training_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Examples, labels and member masks ``[M, N]`` for the trainer (duplicates repeated)."""
        rows = np.repeat(np.arange(len(self.canary_x)), self.copies)
        X = np.concatenate([self.base_x, self.canary_x[rows]]).astype(np.float32)
        y = np.concatenate([self.base_y, self.canary_y[rows]]).astype(np.int64)
        models = self.membership.shape[1]
        mask = np.ones((models, len(X)), bool)
        mask[:, len(self.base_x) :] = self.membership[rows].T
        return X, y, mask

    def save(self, path: Path) -> None:
        write_npz(path, {k: getattr(self, k) for k in self.__dataclass_fields__})


def load_audit_set(path: Path) -> AuditSet:
    with open_npz(path) as f:
        return AuditSet(**{k: f[k] for k in AuditSet.__dataclass_fields__})


def build_audit_set(
    X: np.ndarray,
    y: np.ndarray,
    candidates: np.ndarray,
    num_classes: int,
    settings: DatasetSettings,
    models: int,
    seed: int,
) -> AuditSet:
    """Draw the base records and the canaries from ``candidates`` (prepared rows), and the design.

    Inputs are assumed scaled to [0, 1] (every built-in image dataset is); blank canaries get a
    constant value drawn uniformly per canary, noise canaries i.i.d. uniform values.
    """
    rng = np.random.default_rng(seed)
    counts = settings.canaries.as_dict()
    k_total = sum(counts.values())
    needed = settings.base + k_total
    if len(candidates) < needed:
        raise ValueError(
            f"need {settings.base} base records + {k_total} canaries = {needed} rows, "
            f"but the dataset has only {len(candidates)} outside its evaluation split"
        )
    order = rng.permutation(np.asarray(candidates))
    base, sources = order[: settings.base], order[settings.base : needed]
    cX, cy = X[sources].astype(np.float32).copy(), y[sources].astype(np.int64).copy()
    ctype = np.repeat(np.arange(len(CANARY_TYPES)), [counts[t] for t in CANARY_TYPES])
    copies = np.ones(k_total, np.int64)
    source = sources.astype(np.int64).copy()
    for t, name in enumerate(CANARY_TYPES):
        idx = np.flatnonzero(ctype == t)
        if idx.size == 0:
            continue
        if name == "mislabeled":
            cy[idx] = (cy[idx] + rng.integers(1, num_classes, idx.size)) % num_classes
        elif name == "blank":
            level = rng.uniform(0.0, 1.0, idx.size).astype(np.float32)
            cX[idx] = level.reshape((-1,) + (1,) * (cX.ndim - 1))
            cy[idx] = rng.integers(0, num_classes, idx.size)
            source[idx] = -1
        elif name == "ood":
            if settings.ood == "noise":
                cX[idx] = rng.uniform(0.0, 1.0, cX[idx].shape).astype(np.float32)
                cy[idx] = rng.integers(0, num_classes, idx.size)
                source[idx] = -1
            else:
                cX[idx] = 1.0 - cX[idx]
        elif name == "duplicates":
            copies[idx] = settings.duplicate_copies
        elif name == "mislabeled_duplicates":
            cy[idx] = (cy[idx] + rng.integers(1, num_classes, idx.size)) % num_classes
            copies[idx] = settings.duplicate_copies
    membership = balanced_membership(k_total, models, rng)
    return AuditSet(
        base_x=X[base].astype(np.float32),
        base_y=y[base].astype(np.int64),
        canary_x=cX,
        canary_y=cy,
        canary_type=ctype.astype(np.int64),
        copies=copies,
        source=source,
        membership=membership,
    )


def query_augmentations(X: np.ndarray, augment: bool) -> np.ndarray:
    """Queries ``[N, A, ...]``: the input alone, or with its four one-pixel shifts (image data).

    Shifts fill the vacated border with zeros. Tabular data (2-d ``X``) has no augmentations.
    """
    X = np.asarray(X, dtype=np.float32)
    if not augment or X.ndim != 4:
        return X[:, None]
    views = [X]
    for axis, step in ((1, 1), (1, -1), (2, 1), (2, -1)):
        shifted = np.roll(X, step, axis=axis)
        edge = [slice(None)] * 4
        edge[axis] = slice(0, 1) if step > 0 else slice(-1, None)
        shifted[tuple(edge)] = 0.0
        views.append(shifted)
    return np.stack(views, axis=1)
