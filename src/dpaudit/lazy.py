"""Lazy re-exports: a module's names loaded from their own modules on first use.

A package that re-exports names of its submodules (``dpaudit.bounds``, ``dpaudit.pipeline``, and
``dpaudit.config`` for the check stage's helpers) keeps them in a ``_LAZY`` table (name → module) and
sets ``__getattr__, __dir__ = lazy_exports(__name__, _LAZY)``: importing the package then loads none
of those modules, so a stage imports only the code it runs (:mod:`dpaudit.deps` reads the table to
follow ``from pkg import name`` to the module that defines ``name``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    module: str, table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` loading each name of ``table`` (name → module) from its module, and
    a ``__dir__`` listing those names with the module's own."""

    def getattr_(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return getattr(importlib.import_module(table[name]), name)

    def dir_() -> list[str]:
        return sorted({*vars(sys.modules[module]), *table})

    return getattr_, dir_
