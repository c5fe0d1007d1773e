"""The one-run game of Steinke, Nasr & Jagielski 2023 (:data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`):
canaries, their placement and clipping, seeds and which analyses a headline may count.

m canaries are each included independently with probability ½ (Bernoulli draws from the setting's
seed, decided before training), ONE model is trained, and the auditor guesses inclusion from one score
per canary. Their Thm. 5.2 bounds the number of correct guesses of an (ε, δ)-DP algorithm, so a count
above that bound refutes ε.

White-box gradient canaries (their §6, "Dirac canaries") are gradients with one non-zero coordinate.
Here each sits on its own *inert* coordinate: a first-layer weight from an input feature that is 0 in
every record of D, so that no record's gradient touches it and it never reaches the forward pass (cf.
the instantiation audit's threat model E). Where the data has too few such features, the audit's MLP
takes ``padding`` extra input features that are 0 in every record: an audit instrument that leaves the
mechanism under test (per-example clipping, summation, Gaussian noise) as it is (only the Glorot scale
of the first layer's initial weights follows its wider fan-in). On these coordinates
the canaries' game is exactly the Gaussian canary game of the declared mechanism, which is why the
ceiling on the ideal game is the yardstick of the audit's power.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpaudit.data.worlds import seed_from_text

__all__ = [
    "RUN_FILE",
    "analysis_counts",
    "canary_coordinates",
    "clip_canaries",
    "curve_sizes",
    "padding_for",
    "setting_seed",
]

#: The train stage's one run: inclusion bits, canary coordinates, θ_0 and θ_T at them, final weights.
RUN_FILE = "run.npz"


def setting_seed(values: Mapping[str, Any]) -> int:
    """A stable 31-bit seed from a setting's own values (sha256 of their sorted JSON), never from its
    position in a grid: the same setting draws the same canaries and noise wherever it appears.

    Same hash as :func:`dpaudit.data.worlds.setting_seed` (:func:`~dpaudit.data.worlds.
    seed_from_text`), but of named values (a mapping, order-free) rather than a positional tuple's
    ``repr``: the two serialisations give different seeds, and switching this one would redraw every
    one-run audit's canaries and noise, so both stay."""
    blob = json.dumps({str(k): values[k] for k in sorted(values)}, sort_keys=True, default=str)
    return seed_from_text(blob)


def padding_for(zero_features: np.ndarray, units: int, canaries: int) -> int:
    """Extra all-zero input features needed so that the first dense layer (``units`` outputs) has at
    least ``canaries`` inert weights: each zero feature i gives the ``units`` weights W[i, :]."""
    if units < 1 or canaries < 0:
        raise ValueError(f"need units >= 1 and canaries >= 0, got {units}, {canaries}")
    have = int(np.count_nonzero(zero_features)) * units
    return max(0, math.ceil((canaries - have) / units))


def canary_coordinates(
    zero_features: np.ndarray, units: int, canaries: int, seed: int | Sequence[int]
) -> np.ndarray:
    """``canaries`` distinct flat coordinates of the first dense kernel ``[d, units]`` (row-major, so
    coordinate i·units + j is W[i, j]) whose feature i is 0 in every record, in a seeded random order
    (canary k sits on coordinate k of the result; a curve over the first m' canaries takes a prefix)."""
    inert = np.flatnonzero(np.repeat(np.asarray(zero_features, bool), units))
    if inert.size < canaries:
        raise ValueError(f"{canaries} canaries need {canaries} inert coordinates, the model has {inert.size}")
    return np.random.default_rng(seed).permutation(inert)[:canaries].astype(np.int64)


def clip_canaries(
    raw: np.ndarray, layer_of: np.ndarray, clip_norm: float, unclipped_layers: Sequence[int] = ()
) -> np.ndarray:
    """Per-example clipping of Dirac canaries (Abadi et al. Alg. 1, :data:`dpaudit.references.ABADI`):
    canary k has the single non-zero entry ``raw[k]`` in layer ``layer_of[k]``.

    A correct pipeline scales each canary to norm at most C. The broken pipeline
    (``break: unclipped_layer``) leaves ``unclipped_layers`` out of both the norm and the scaling, as
    a per-layer clipping bug would: a canary living there enters at its raw size.
    """
    raw = np.asarray(raw, dtype=np.float64)
    skip = np.isin(np.asarray(layer_of), np.asarray(list(unclipped_layers), dtype=np.int64))
    norm = np.where(skip, 0.0, np.abs(raw))  # the norm the clip step sees (the canary's only entry)
    factor = np.minimum(1.0, clip_norm / np.maximum(norm, 1e-300))
    return np.where(skip, raw, raw * factor)


def curve_sizes(requested: Sequence[int], canaries: int) -> list[int]:
    """The canary counts of the ε_LB-against-m curve: those requested that fit, plus m itself."""
    return sorted({int(m) for m in requested if m <= canaries} | {int(canaries)})


def analysis_counts(analysis: str, sampling_rate: float) -> bool:
    """Whether the headline may count ``analysis`` for a DP-SGD run at this sampling rate.

    ``steinke`` (Thm. 5.2) assumes only the canaries' independent ½ inclusion, which the audit itself
    guarantees. ``fdp_gaussian`` (the f-DP analysis of Mahloujifar et al. 2024 with the Gaussian
    trade-off family) assumes the mechanism's trade-off curve is some G_μ: true of full-batch DP-SGD,
    whose T steps compose Gaussian mechanisms of sensitivity C into exactly μ = √T/z (Dong, Roth & Su
    Cor. 3.3, :data:`dpaudit.references.DONG_ROTH_SU`), not of Poisson-subsampled steps.
    """
    if analysis == "steinke":
        return True
    if analysis == "fdp_gaussian":
        return sampling_rate >= 1.0
    raise ValueError(f"unknown one-run analysis {analysis!r}")
