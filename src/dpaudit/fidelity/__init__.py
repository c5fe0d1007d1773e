"""Reproductions of the seed papers' headline results and the fidelity table that compares them.

A *profile* (:mod:`dpaudit.fidelity.profiles`) runs one paper's protocol in its own regime, or the
closest setting that fits two CPU cores, and records its numbers, each labelled with the estimator
that produced it, in ``reproductions/<profile>.json`` (:mod:`dpaudit.fidelity.profile`). The
fidelity table (:mod:`dpaudit.fidelity.table`) puts every headline number of the papers
(:data:`dpaudit.references.PAPER_RESULTS`) beside dpaudit's and gives a verdict from a written
tolerance.
"""

from dpaudit.fidelity.profile import (
    Measured,
    Profile,
    ProfileResult,
    read_profile_result,
    write_profile_result,
)

__all__ = ["Measured", "Profile", "ProfileResult", "read_profile_result", "write_profile_result"]
