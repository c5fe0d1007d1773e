"""The registry of reproduction profiles, by name.

Each profile lives in its own module of this package and defines ``PROFILE`` (a
:class:`dpaudit.fidelity.Profile`); the modules are imported only when their profile runs, so
listing profiles imports no TensorFlow.
"""

from __future__ import annotations

import importlib

from dpaudit.fidelity.profile import Profile

__all__ = ["PROFILE_MODULES", "get_profile"]

#: Profile name -> module defining ``PROFILE``.
PROFILE_MODULES: dict[str, str] = {
    "nasr-f-paper-regime": "dpaudit.fidelity.profiles.nasr_f",
    "nasr-f-trainer": "dpaudit.fidelity.profiles.nasr_f_trainer",
    "nasr-d-crafters": "dpaudit.fidelity.profiles.nasr_d",
    "nasr-ad-paper-trials": "dpaudit.fidelity.profiles.nasr_ad",
    "nasr-e-paper-placement": "dpaudit.fidelity.profiles.nasr_e",
    "erlingsson-overfit": "dpaudit.fidelity.profiles.erlingsson",
    "negoescu-adult": "dpaudit.fidelity.profiles.negoescu",
    "bernau-candidates": "dpaudit.fidelity.profiles.bernau",
}


def get_profile(name: str) -> Profile:
    """The profile called ``name``; an unknown name is refused with the known ones."""
    if name not in PROFILE_MODULES:
        raise KeyError(f"unknown fidelity profile {name!r}; known: {', '.join(sorted(PROFILE_MODULES))}")
    module = importlib.import_module(PROFILE_MODULES[name])
    profile = module.PROFILE
    if not isinstance(profile, Profile) or profile.name != name:
        raise TypeError(f"{PROFILE_MODULES[name]}.PROFILE must be the Profile named {name!r}")
    return profile
