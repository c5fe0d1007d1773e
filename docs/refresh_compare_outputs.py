"""Re-run the README's "Compare runs" commands in a scratch copy and rewrite their output blocks.

The README (and docs/pipeline.md) show the real output of ``dvc metrics diff`` and ``dpaudit compare``
between HTML comment markers (``<!-- output: dvc metrics diff -->`` ... ``<!-- /output -->``).
``tests/test_readme_compare.py`` checks that those blocks are still current; when code changes move
the numbers, refresh them with one command from the repository root::

    python docs/refresh_compare_outputs.py            # full default pipeline in a scratch copy

It copies what git would commit into a temporary directory (no pipeline outputs), runs the default
``dvc repro``, commits, runs the README's ``dvc exp run`` (:data:`EXPERIMENT_COMMAND`) and captures
each documented command. ``--saved DIR`` reuses outputs saved by an earlier ``--save DIR`` run.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: Every file with output blocks of these commands.
DOCUMENTS = (README, REPO / "docs" / "pipeline.md")
#: The README's experiment: ρβ = 0.99 as the only and the headline setting (``-S`` values, in order).
SETTINGS = ("identifiability.train.rho_beta=[0.99]", "identifiability.train.reference_rho_beta=0.99")
#: The command as the README writes it.
EXPERIMENT_COMMAND = "dvc exp run " + " ".join(f"-S {shlex.quote(value)}" for value in SETTINGS)
# Each documented command: its marker label and its argument vector (the program from the environment's bin).
COMMANDS: dict[str, list[str]] = {
    "dvc metrics diff": ["dvc", "metrics", "diff"],
    "dpaudit compare": ["dpaudit", "compare"],
}


def command(label: str) -> list[str]:
    """The argument vector of a documented command, its program taken from this interpreter's bin."""
    program, *args = COMMANDS[label]
    return [str(Path(sys.executable).parent / program), *args]
#: Characters of the horizontal rules DVC draws around its tables.
RULE = set("─━┏┓┗┛┡┩└┘├┤┼╇╈┳┻ ")
BLOCK = re.compile(
    r"(<!-- output: (?P<label>[^>]+?) -->\n```text\n)(?P<body>.*?)(```\n<!-- /output -->)", re.S
)


def exp_run_args() -> list[str]:
    """The README's experiment as ``dvc`` arguments: ``exp run -S <setting> ...``."""
    return ["exp", "run", *(arg for value in SETTINGS for arg in ("-S", value))]


def _workflow() -> tuple[Callable[..., None], Callable[..., str]]:
    """``_copy_tree`` and ``_run`` of the end-to-end tests, so the copy is made exactly as they make it."""
    spec = importlib.util.spec_from_file_location("_dvc_workflow", REPO / "tests" / "test_dvc_workflow.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._copy_tree, module._run


def run_compare(work: Path, timeout: float = 3600) -> dict[str, str]:
    """Run the default pipeline and the README's experiment in ``work``; return each command's output."""
    copy_tree, run = _workflow()
    dvc = str(Path(sys.executable).parent / "dvc")
    work.mkdir(parents=True, exist_ok=True)
    copy_tree(work)
    run(["git", "init", "-q"], work)
    if not (work / ".dvc" / "config").exists():
        run([dvc, "init", "-q"], work)
    run([dvc, "repro"], work, timeout=timeout)
    run(["git", "add", "-A"], work)
    run(["git", "commit", "-q", "-m", "baseline"], work)
    run([dvc, *exp_run_args()], work, timeout=timeout)
    return {label: run(command(label), work) for label in COMMANDS}


def documented(text: str) -> dict[str, str]:
    """The output blocks of a README text, keyed by their marker label."""
    return {m.group("label"): m.group("body") for m in BLOCK.finditer(text)}


def rewrite(text: str, outputs: dict[str, str]) -> str:
    """``text`` with every marked block replaced by its command's fresh output (trailing blanks trimmed)."""

    def replace(match: re.Match[str]) -> str:
        label = match.group("label")
        if label not in outputs:
            return match.group(0)
        lines = [line.rstrip() for line in outputs[label].strip("\n").splitlines()]
        rule = [not line.strip() or set(line.strip()) <= RULE for line in lines]
        width = max((len(line) for line, is_rule in zip(lines, rule, strict=True) if not is_rule), default=0)
        # DVC draws its rules across the whole terminal; cut them to the table's width.
        lines = [line[:width] if is_rule else line for line, is_rule in zip(lines, rule, strict=True)]
        return match.group(1) + "\n".join(lines) + "\n" + match.group(4)

    return BLOCK.sub(replace, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="scratch directory (default: a new temporary one)")
    parser.add_argument("--save", type=Path, help="also save each command's output to this directory")
    parser.add_argument("--saved", type=Path, help="rewrite from outputs saved earlier, without running")
    args = parser.parse_args(argv)

    if args.saved:
        outputs = {label: (args.saved / f"{label.replace(' ', '_')}.txt").read_text() for label in COMMANDS}
    else:
        work = args.work or Path(tempfile.mkdtemp(prefix="dpaudit-compare-")) / "repo"
        print(f"running the default pipeline in {work} (several minutes)", file=sys.stderr)
        outputs = run_compare(work)
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        for label, out in outputs.items():
            (args.save / f"{label.replace(' ', '_')}.txt").write_text(out)
    missing = set(COMMANDS) - set(documented(README.read_text()))
    if missing:
        print(f"README.md has no output block for: {', '.join(sorted(missing))}", file=sys.stderr)
        return 1
    for path in DOCUMENTS:
        old = path.read_text()
        new = rewrite(old, outputs)
        path.write_text(new)
        print(f"{path.name} updated" if new != old else f"{path.name} was already current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
