"""RMIA beside LiRA on the same reference models, on the undefended models (Zarifzadeh et al. 2024).

RMIA's claim is power at low FPR with few reference models. The attack stage scores every
non-private release with RMIA and with LiRA fitted on exactly RMIA's reference models (1 out-model
offline; 2 in- and 2 out-models online), next to LiRA on all M − 1 shadows; this module collects
their TPR at the lowest FPR level, with two-sided Clopper–Pearson intervals, per canary type.
"""

from __future__ import annotations

from typing import Any

from dpaudit.bounds.strength import tpr_at_fpr
from dpaudit.experiments.canaries.design import DEFENCE_KINDS, REFERENCE_ATTACKS
from dpaudit.scores import ScoreSet

#: The compared attacks, in table order: per reference count, RMIA then LiRA on the same models,
#: then LiRA on every shadow.
_PAIRS = tuple(f"{a}_{mode}_r{r}" for mode, r in REFERENCE_ATTACKS for a in ("rmia", "lira"))
COMPARED = (*_PAIRS, "lira_online_logit")


def reference_comparison(
    sets: list[ScoreSet], info: dict[str, Any], level: float, confidence: float
) -> list[dict[str, Any]]:
    """Per canary type of the undefended models: each compared attack's TPR at ``level`` FPR."""
    baseline = next((n for n, i in info.items() if DEFENCE_KINDS[i["kind"]].undefended), None)
    rows = []
    types = dict.fromkeys(s.group["canary_type"] for s in sets if s.group["defence"] == baseline)
    for ctype in types:
        row: dict[str, Any] = {"canary_type": ctype}
        for attack in COMPARED:
            wanted = {"defence": baseline, "attack": attack, "canary_type": ctype}
            found = [s for s in sets if s.group == wanted]
            if found:
                s = found[0]
                value, low, high, _ = tpr_at_fpr(s.scores[s.member], s.scores[~s.member], level, confidence)
                row[attack] = {"value": value, "low": low, "high": high}
        if len(row) > 1:
            rows.append(row)
    return rows
