"""Defences (privacy strategies) as registered kinds with their attributes.

An experiment that audits several defences (:mod:`dpaudit.experiments.canaries`,
:mod:`dpaudit.experiments.membership`) registers each kind once, with what the stages need to know
about it, and its train, attack and bounds stages read these attributes instead of comparing kind
names: adding a defence kind is one entry in that experiment's table. It lives with training
because the train stage reads it first (how to train each defence).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["DefenceKind", "defence_kinds"]


@dataclass(frozen=True)
class DefenceKind:
    """One kind of defence and how the stages treat it.

    ``private``: trained by DP-SGD at a noise multiplier, so it is a DP mechanism whose ε the
    accountants bound (and the audit checks its lower bounds against them); otherwise non-private.
    ``neural``: trained by the batched (DP-)SGD trainer on the experiment's network (False: a model
    trained elsewhere, such as XGBoost). ``label_only``: the released model answers only its top-1
    label (a heuristic that hides confidence), so only label-only attacks apply. ``heuristic``: a
    published non-private defence that changes how the model is trained (its outputs are released
    as they are), evaluated against the population-level attack it was published with.
    """

    name: str
    description: str
    private: bool = False
    neural: bool = True
    label_only: bool = False
    heuristic: bool = False

    @property
    def undefended(self) -> bool:
        """No defence at all: a baseline that the other defences improve on."""
        return not self.private and not self.label_only and not self.heuristic


def defence_kinds(*kinds: DefenceKind) -> Mapping[str, DefenceKind]:
    """The table of an experiment's defence kinds by name (names must be unique)."""
    table = {k.name: k for k in kinds}
    if len(table) != len(kinds):
        raise ValueError(f"defence kind names must be unique, got {[k.name for k in kinds]}")
    return table
