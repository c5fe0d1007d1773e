"""Dataset sensitivity (Bernau et al. Def. 6): dissimilarity measures and the search for D′."""

from dpaudit.sensitivity.measures import MEASURES, Measure, NegativeSSIM, make_measure
from dpaudit.sensitivity.search import (
    BoundedChoice,
    Candidate,
    PairCandidate,
    SensitivityConfig,
    SensitivityResult,
    UnboundedChoice,
    run_sensitivity,
    search_bounded,
    search_unbounded,
)

__all__ = [
    "MEASURES",
    "BoundedChoice",
    "Candidate",
    "Measure",
    "NegativeSSIM",
    "PairCandidate",
    "SensitivityConfig",
    "SensitivityResult",
    "UnboundedChoice",
    "make_measure",
    "run_sensitivity",
    "search_bounded",
    "search_unbounded",
]
