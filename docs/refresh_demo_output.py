"""Re-run the README's one-run demo and rewrite its output block.

The README shows the real output of ``python docs/examples/audit_my_dp_sgd.py`` between the markers
``<!-- demo: python docs/examples/audit_my_dp_sgd.py -->`` and ``<!-- /demo -->``;
``tests/training_audit/test_example.py`` runs the demo and checks that the block is still current (every
line's
words, numbers aside). When the verdict's wording or numbers change, refresh it from the repository
root::

    python docs/refresh_demo_output.py           # rewrite the block
    python docs/refresh_demo_output.py --check   # exit 1 if the block is stale
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: The demo as the README writes it, and its marker label.
COMMAND = "python docs/examples/audit_my_dp_sgd.py"
BLOCK = re.compile(r"(<!-- demo: (?P<label>[^>]+?) -->\n```text\n)(?P<body>.*?)(```\n<!-- /demo -->)", re.S)
#: A number in the output (digits vary with the machine's floating point; words must not).
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def run_demo(timeout: float = 600) -> str:
    """The demo's standard output, run with this interpreter from the repository root."""
    env = {**os.environ, "DPAUDIT_PROGRESS": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}
    program, *args = COMMAND.split()[1:]
    proc = subprocess.run(
        [sys.executable, program, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{COMMAND} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc.stdout


def documented(text: str) -> str:
    """The README's demo block (its body), or a ``ValueError`` naming the missing marker."""
    match = BLOCK.search(text)
    if match is None or match.group("label") != COMMAND:
        raise ValueError(f"README.md has no block <!-- demo: {COMMAND} --> ... <!-- /demo -->")
    return match.group("body")


def rewrite(text: str, output: str) -> str:
    """``text`` with the demo block replaced by ``output`` (trailing blanks trimmed)."""
    documented(text)
    lines = [line.rstrip() for line in output.strip("\n").splitlines()]
    return BLOCK.sub(lambda m: m.group(1) + "\n".join(lines) + "\n" + m.group(4), text, count=1)


def shape(output: str) -> list[str]:
    """The lines of an output with every number masked: what must match the README exactly."""
    return [NUMBER.sub("#", line.rstrip()) for line in output.strip("\n").splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the README's block is stale")
    args = parser.parse_args()
    text, output = README.read_text(), run_demo()
    if args.check:
        stale = shape(documented(text)) != shape(output)
        print("README demo block is stale: run python docs/refresh_demo_output.py" if stale else "current")
        return int(stale)
    README.write_text(rewrite(text, output))
    print(f"rewrote the demo block of {README.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
