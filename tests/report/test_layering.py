"""Layering: experiments and bounds describe results through :mod:`dpaudit.results`, never the report.

The report renders what experiments produce; if an experiment imported the report, a change to the
page's presentation could change (or break) an experiment. A static walk over every module's import
statements (no import is executed) keeps the dependency one-way.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "dpaudit"
LAYERS = ("experiments", "bounds")
FORBIDDEN = "dpaudit.report"


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every module ``path`` imports, relative imports resolved."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.append((node.lineno, base))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def _reaches_report(name: str) -> bool:
    return name == FORBIDDEN or name.startswith(FORBIDDEN + ".")


def _modules() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (SRC / layer).rglob("*.py"))


def test_there_are_modules_to_check() -> None:
    modules = _modules()
    assert len(modules) > 20
    assert any(p.name == "report.py" for p in modules)  # the experiments' report builders are included


@pytest.mark.parametrize("layer", LAYERS)
def test_no_module_of_the_layer_imports_the_report(layer: str) -> None:
    offenders = [
        f"{path.relative_to(SRC.parent)}:{line}: {name}"
        for path in sorted((SRC / layer).rglob("*.py"))
        for line, name in _imported_modules(path)
        if _reaches_report(name)
    ]
    assert offenders == [], "import dpaudit.results instead of dpaudit.report:\n" + "\n".join(offenders)


def test_results_contract_stands_alone() -> None:
    imported = [name for _, name in _imported_modules(SRC / "results.py")]
    assert not any(_reaches_report(name) for name in imported)


def test_the_walk_sees_absolute_relative_and_nested_imports(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "dpaudit" / "experiments" / "x"
    fake.mkdir(parents=True)
    module = fake / "m.py"
    module.write_text(
        "import os\n"
        "from dpaudit.report import render\n"
        "from ... import report\n"
        "def f():\n    import dpaudit.report.figures\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path / "dpaudit")
    names = [name for _, name in _imported_modules(module)]
    assert [n for n in names if _reaches_report(n)] == [
        "dpaudit.report",
        "dpaudit.report.render",
        "dpaudit.report",
        "dpaudit.report.figures",
    ]
