"""RMIA beside LiRA on the same reference models, on the undefended models (Zarifzadeh et al. 2024).

RMIA's claim is power at low FPR with few reference models. The attack stage scores every
non-private release with RMIA and with LiRA fitted on exactly RMIA's reference models (1 out-model
offline; 2 in- and 2 out-models online), next to LiRA on all M − 1 shadows; this module collects
their TPR at the lowest FPR level, with two-sided intervals (:func:`dpaudit.bounds.strength.tpr_interval`),
per canary type.
"""

from __future__ import annotations

from typing import Any

from dpaudit.experiments.canaries.config import CANARY_TYPES
from dpaudit.experiments.canaries.design import DEFENCE_KINDS, REFERENCE_ATTACKS
from dpaudit.scores import group_key
from dpaudit.table import ResultsTable, fpr_tag

#: The compared attacks, in table order: per reference count, RMIA then LiRA on the same models,
#: then LiRA on every shadow.
_PAIRS = tuple(f"{a}_{mode}_r{r}" for mode, r in REFERENCE_ATTACKS for a in ("rmia", "lira"))
COMPARED = (*_PAIRS, "lira_online_logit")


def reference_comparison(table: ResultsTable, info: dict[str, Any], level: float) -> list[dict[str, Any]]:
    """Per canary type of the undefended models: each compared attack's TPR at ``level`` FPR, read from
    the audit's results table (the rates estimator already computed it with its interval)."""
    baseline = next((n for n, i in info.items() if DEFENCE_KINDS[i["kind"]].undefended), None)
    quantity = f"tpr_at_fpr_{fpr_tag(level)}"
    rows = []
    for ctype in CANARY_TYPES:
        row: dict[str, Any] = {"canary_type": ctype}
        for attack in COMPARED:
            found = table.select(quantity, group_key(canary_type=ctype, defence=baseline, attack=attack))
            if found:
                row[attack] = {"value": found[0].value, "low": found[0].low, "high": found[0].high}
        if len(row) > 1:
            rows.append(row)
    return rows
