"""The README as a front door, and its "Compare runs" output kept current.

Fast: README.md stays short (at most 200 lines) with its sections in order, every link into
``docs/`` (and every link between the docs pages) resolves to a file and, where it names one, a
heading; user docs name no issue numbers and no machine paths; the experiment and parameter pages
cover every registered experiment.

Slow: in a copy of the repository with the default ``params.yaml``, the full pipeline runs, is
committed, and the README's commands run as written (``dvc exp run -S
'identifiability.train.rho_beta=[0.99]' -S identifiability.train.reference_rho_beta=0.99``, ``dvc
metrics diff`` and ``dvc exp show --only-changed``). Their output must stay readable (at most 40 lines;
at most 30 columns) and match the README's marked output blocks: the same lines and names, numbers to a
relative 1e-3 (DVC prints rounded values). When numbers move on purpose, ``python
docs/refresh_compare_outputs.py`` rewrites the blocks. Then, from the baseline again, shrinking the grid
to the headline's own setting (``rho_beta=[0.9]``) moves no headline: each setting is seeded by its own
values, not by its neighbours. ``dpaudit compare`` runs after each experiment: after the first it must
match the block in ``docs/pipeline.md`` (numbers to one unit in their last digit, experiment names
aside); after the second, with both experiments in it, it must fit 100 columns and 10 lines. Last,
from the baseline, the README's bug switch of the training audit (``-S
training_audit.train.options.bug=noise_div10``) turns ``caught`` from 0 to 1 in ``dvc metrics diff``,
``dpaudit compare`` opens with the changed verdict, and the report says the code does not match.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import re
from pathlib import Path
from types import ModuleType

import pytest
from tests.test_dvc_workflow import BIN, REPO, _copy_tree, _run

README = REPO / "README.md"
DOCS = REPO / "docs"
PIPELINE = DOCS / "pipeline.md"
#: ``dpaudit compare``: its output block in docs/pipeline.md, and the most columns and lines it prints.
COMPARE = "dpaudit compare"
COMPARE_WIDTH, COMPARE_LINES = 100, 10
BUG = "noise_div10"  # the README's one-line bug switch of the training audit (noise σ/10)
MAX_LINES = 200
HEADINGS = (
    "## Quick start",
    "## Read the report",
    "## Reading the numbers",
    "## Audit your own scores, model or training",
    "## Compare runs",
    "## More",
)
FORBIDDEN = (
    re.compile(r"\bissues?\s*#?\d+", re.I),
    re.compile(r"acceptance profile", re.I),
    re.compile(r"(?<![\w.])/(work|tmp)\b"),
    re.compile(r"\.\./shared\b"),
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _refresh() -> ModuleType:
    """``docs/refresh_compare_outputs.py``: the documented commands and the output-block markers."""
    spec = importlib.util.spec_from_file_location("_refresh_compare", DOCS / "refresh_compare_outputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _user_docs() -> list[Path]:
    return [README, REPO / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, flags=re.M)}


# ------------------------------------------------------------------------------------------------ fast


def test_readme_is_a_short_front_door_with_its_sections_in_order() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES
    positions = [text.find("\n" + heading + "\n") for heading in HEADINGS]
    assert all(p > 0 for p in positions), dict(zip(HEADINGS, positions, strict=True))
    assert positions == sorted(positions)
    assert "make run" in text and "make test" in text
    assert "docs/img/report.png" in text and (DOCS / "img" / "report.png").is_file()
    assert (DOCS / "img" / "report.png").stat().st_size <= 300_000


def test_user_docs_name_no_issue_numbers_and_no_machine_paths() -> None:
    for path in _user_docs():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for pattern in FORBIDDEN:
                assert not pattern.search(line), f"{path.relative_to(REPO)}:{number}: {line}"


def test_every_docs_link_resolves_to_a_file_and_heading() -> None:
    readme_links = [link for link in LINK.findall(README.read_text()) if link.startswith("docs/")]
    assert len(readme_links) >= 10  # the README points into docs/ for everything it leaves out
    for page in _user_docs():
        for link in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", link):  # https:, mailto:
                continue
            target, _, anchor = link.partition("#")
            path = (page.parent / target).resolve() if target else page
            assert path.is_file(), f"{page.relative_to(REPO)}: broken link {link}"
            if anchor and path.suffix == ".md":
                assert anchor in _anchors(path), f"{page.relative_to(REPO)}: no heading for {link}"


def test_experiment_and_parameter_pages_cover_every_experiment() -> None:
    from dpaudit.experiments import registry

    names = set(registry())
    assert {"identifiability", "membership", "canaries", "instantiation", "target", "onerun"} <= names
    for page in ("experiments.md", "pipeline.md"):
        text = (DOCS / page).read_text()
        missing = {name for name in names if f"`{name}`" not in text}
        assert not missing, f"docs/{page} does not cover {sorted(missing)}"
    # The parameters table has one row per experiment.
    table = (DOCS / "pipeline.md").read_text().split("## Parameters", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1) for m in re.finditer(r"^\| `([a-z_]+)` \|", table, flags=re.M)}
    assert names <= rows, sorted(names - rows)


def test_the_metrics_diff_block_is_said_to_follow_an_experiment_not_make_run() -> None:
    """`dvc metrics diff` compares HEAD with the workspace: after `make run` alone nothing changed and it
    prints nothing, so the sentence before its block must name the `dvc exp run` that produces it."""
    text = README.read_text(encoding="utf-8")
    before = text[: text.index("<!-- output: dvc metrics diff -->")].rstrip()
    sentence = before[before.rindex("\n\n") :]
    assert "dvc exp run" in sentence and "after `make run` alone it prints nothing" in sentence, sentence


def test_readme_has_one_output_block_per_documented_command() -> None:
    refresh = _refresh()
    blocks = refresh.documented(README.read_text())
    assert set(blocks) == set(refresh.COMMANDS)
    for label, block in blocks.items():
        assert len(_rows(block)) >= 3, f"{label}: the README's output block is empty"
        if label == COMPARE:
            _compare_compare(block, block)
        else:
            _compare_table(label, block, block)
    assert blocks[COMPARE] == refresh.documented(PIPELINE.read_text())[COMPARE]
    assert len(blocks["dvc metrics diff"].strip().splitlines()) <= 40
    text = README.read_text()
    assert refresh.EXPERIMENT_COMMAND in text
    for command in ("dvc metrics diff", COMPARE, "dvc exp show --only-changed", "dvc plots diff"):
        assert command in text


def test_compare_block_fits_and_shows_the_readme_experiment() -> None:
    block = _refresh().documented(PIPELINE.read_text())[COMPARE]
    lines = block.strip("\n").splitlines()
    assert len(lines) <= COMPARE_LINES and max(map(len, lines)) <= COMPARE_WIDTH
    assert "adult-identifiability" in lines[0] and "digits-identifiability" in lines[0]
    assert "rho_beta=[0.99]" in block and "reference_rho_beta=0.99" in block
    assert COMPARE in README.read_text()
    renamed = re.sub(r"^(main|master)(\s)", lambda m: ("master" if m[1] == "main" else "main  ") + m[2],
                     block, flags=re.M)  # fmt: skip
    _compare_compare(block, renamed.replace("0.780", "0.781"))
    proven = re.search(r"\(baseline\)\s+(\d+\.\d+)", block)
    assert proven, block
    moved = f"{float(proven[1]) + 0.05:.2f}"  # five units in the last digit: a real change
    with pytest.raises(AssertionError):
        _compare_compare(block, block.replace(proven[0], proven[0].replace(proven[1], moved)))


def test_output_matching_tolerates_rounding_and_run_names_only() -> None:
    assert _same_line("a.b  1.2345  2", "a.b  1.2346  2")
    assert not _same_line("a.b  1.2345  2", "a.b  1.30  2")
    assert _same_line("acc  0.7804  0.7811  0.00071", "acc  0.7804  0.7811  0.0007")
    assert not _same_line("acc  0.7804  0.7811  0.00071", "acc  0.7804  0.7811  0.0009")
    assert not _same_line("a.b  1.2345", "a.c  1.2345")
    assert not _same_line("a.b  1.2345", "a.b  1.2345  0.1")
    old = "  └── 7907c69 [noble-meal]   06:43 AM   4.5951   c7ecf1a4699372c37bd3f27cb5e8d449.dir"
    new = "  └── 0a1b2c3 [other-name]   Nov 26, 2026   4.5952   d106ee6e414d555bf47a4c37093611fb.dir"
    assert _same_line(old, new)
    assert _same_line("  master   06:36 AM   2.1972", "  main   11:02 PM   2.1972")
    assert _cells("  workspace   -   4.5951") == ["workspace", "-", "4.5951"]
    wide = "  Experiment   Created   a.rdp   a.pld   …\n  master   06:36 AM   2.1972   1.934   …"
    narrow = "  Experiment   Created   a.rdp   …\n  main   1:02 PM   2.1972   …"
    _compare_table("t", wide, narrow)  # fewer columns fit: the shown ones still agree
    with pytest.raises(AssertionError):
        _compare_table("t", wide, "  Experiment   Created   a.rdp   …\n  main   1:02 PM   2.5   …")
    assert _same_shown("0.780", "0.781") and _same_shown("1.44@95%", "1.45@95%")
    assert not _same_shown("0.780", "0.782") and not _same_shown("1.44@95%", "1.44@99%")
    assert _same_shown("1.00e-05", "1.01e-05") and _same_shown("1435", "1436") and _same_shown("–", "–")
    rows = ["<experiment>  (baseline)  1.44", "<experiment>  k=1  2.90", "  j=2", "ε · PLD"]
    table = ["   a-x", "experiment  params  proven", "main  (baseline)  1.44", "filmy-daws  k=1  2.90"]
    assert _anonymous("\n".join([*table, "  j=2", "ε · PLD"])).splitlines()[2:] == rows


# ------------------------------------------------------------------------------------------------ slow

_NUMBER = re.compile(r"^[-+−]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?%?$", re.I)
# What changes from run to run without the numbers changing: clock times and dates of `Created`,
# commit ids, content hashes of outputs (the train manifests record timings), DVC's generated
# experiment names and the default branch's name.
_VOLATILE = re.compile(
    r"\d{1,2}:\d{2}\s*[AP]M|[A-Z][a-z]{2} \d{1,2}, \d{4}|\b\d{4}-\d{2}-\d{2}(T[\d:]+)?"
    r"|\b[0-9a-f]{32}(\.dir)?\b|\b[0-9a-f]{7,40} \[[^\]]+\]|(?<=\s)(main|master)(?=\s|$)"
)


def _cells(line: str) -> list[str]:
    """The cells of one table line: DVC separates columns by two or more spaces (or box bars)."""
    line = _VOLATILE.sub("<volatile>", line)
    cells = [c for c in re.split(r"\s{2,}|[│┃]", line.strip()) if c.strip()]
    return [c.strip() for c in cells if not set(c.strip()) <= set("─━┏┓┗┛┡┩└┘├┤┼╇╈┳┻")]


#: Numbers agree to a relative 1e-3, or to 5e-5 absolute: DVC's `Change` column is the difference of two
#: close values, so another CPU's last bits in them move it by far more than 1e-3 relative (a test
#: accuracy change printed 0.00071 on one machine and 0.0007 on another).
CELL_REL_TOL, CELL_ABS_TOL = 1e-3, 5e-5


def _same_cell(a: str, b: str) -> bool:
    if _NUMBER.match(a) and _NUMBER.match(b):
        x, y = (float(t.rstrip("%").replace("−", "-")) for t in (a, b))
        return math.isclose(x, y, rel_tol=CELL_REL_TOL, abs_tol=CELL_ABS_TOL)
    return a == b


def _same_line(documented: str, actual: str) -> bool:
    left, right = _cells(documented), _cells(actual)
    return len(left) == len(right) and all(_same_cell(a, b) for a, b in zip(left, right, strict=True))


def _rows(text: str) -> list[list[str]]:
    """The non-rule lines of a DVC table, as cells (header first)."""
    return [cells for line in text.strip("\n").splitlines() if (cells := _cells(line))]


def _compare_table(label: str, documented: str, actual: str) -> None:
    """Same rows and, column by column, the same names and values (numbers to a relative 1e-3).

    ``dvc exp show`` hides the columns that do not fit the terminal behind ``…``; how many fit
    depends on the width of the generated experiment name, so only the columns shown in both are
    compared, and one list of columns must start the other.
    """
    want, got = _rows(documented), _rows(actual)
    hint = f"{label}: the README's output is stale (python docs/refresh_compare_outputs.py)\n{actual}"
    assert want and len(want) == len(got), hint
    width = min(len(want[0]), len(got[0]))
    if "…" in (want[0][-1], got[0][-1]):
        width = min(width, *(len(table[0]) - (table[0][-1] == "…") for table in (want, got)))
    else:
        assert len(want[0]) == len(got[0]), hint
    for old, new in zip(want, got, strict=True):
        assert len(old) >= width and len(new) >= width, hint
        assert all(
            _same_cell(a, b) for a, b in zip(old[:width], new[:width], strict=True)
        ), f"{hint}\n  README: {old}\n  now:    {new}"


def _unit(text: str) -> float:
    """One unit in the last digit of a number as printed: "0.780" → 0.001, "1.00e-05" → 1e-7."""
    mantissa, _, exponent = text.lower().rstrip("%").partition("e")
    return 10.0 ** (int(exponent or 0) - len(mantissa.partition(".")[2]))


def _same_shown(a: str, b: str) -> bool:
    """Cells of ``dpaudit compare``: numbers to 3 significant digits agree to one unit in their last
    digit (another CPU's last bits may round a value across a boundary); a level after ``@`` exactly."""
    (x, _, level_x), (y, _, level_y) = a.partition("@"), b.partition("@")
    if level_x != level_y or not (_NUMBER.match(x) and _NUMBER.match(y)):
        return a == b
    return abs(float(x) - float(y)) <= 1.01 * max(_unit(x), _unit(y))


def _compare_compare(documented: str, actual: str) -> None:
    """``dpaudit compare`` against its block in docs/pipeline.md: line by line the same cells, numbers
    to one unit in their last digit, experiment names aside."""
    want, got = _rows(_anonymous(documented)), _rows(_anonymous(actual))
    hint = f"docs/pipeline.md's `{COMPARE}` block is stale: paste what it prints now\n{actual}"
    assert len(want) == len(got), hint
    for old, new in zip(want, got, strict=True):
        same = len(old) == len(new) and all(_same_shown(a, b) for a, b in zip(old, new, strict=True))
        assert same, f"{hint}\n  docs: {old}\n  now:  {new}"


def _anonymous(text: str) -> str:
    """``dpaudit compare``'s table with each row's experiment name (DVC draws them at random, and the
    baseline is named by the branch) replaced: rows start at the first column, below the header line
    that starts with "experiment", above the legend (``·``) and the notes (``+N more``)."""
    lines = text.strip("\n").splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("experiment "))
    return "\n".join(
        re.sub(r"^\S+", "<experiment>", line)
        if i > header and line[:1].strip() and "·" not in line and not line.startswith("+")
        else line
        for i, line in enumerate(lines)
    )


def _check_compare(work: Path, experiments: int) -> tuple[str, dict]:
    """``dpaudit compare`` in ``work``, as text (within its limits) and as JSON."""
    text = _run([str(BIN / "dpaudit"), "compare"], work)
    lines = text.rstrip("\n").splitlines()
    assert len(lines) <= COMPARE_LINES and max(map(len, lines)) <= COMPARE_WIDTH, text
    result = json.loads(_run([str(BIN / "dpaudit"), "compare", "--json"], work))
    assert [row["kind"] for row in result["experiments"]] == ["baseline"] + ["experiment"] * experiments
    assert result["audits"] == ["adult-identifiability", "digits-identifiability"], result["audits"]
    assert all(row["name"] in text for row in result["experiments"])
    return text, result


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_readme_compare_commands_and_their_documented_output(tmp_path: Path) -> None:
    refresh = _refresh()
    dvc = str(BIN / "dvc")
    work = tmp_path / "repo"
    work.mkdir()
    _copy_tree(work)  # the default params.yaml: every default audit
    _run(["git", "init", "-q"], work)
    if not (work / ".dvc" / "config").exists():
        _run([dvc, "init", "-q"], work)
    _run([dvc, "repro"], work, timeout=1800)
    _run(["git", "add", "-A"], work)
    _run(["git", "commit", "-q", "-m", "baseline"], work)
    _run([dvc, *refresh.exp_run_args()], work, timeout=1800)

    outputs = {label: _run(refresh.command(label), work) for label in refresh.COMMANDS}
    diff = outputs["dvc metrics diff"]
    assert 0 < len(diff.strip().splitlines()) <= 40, diff
    # The columns the table shows: the CSV's, less its machine-only `rev` and `typ`.
    header = next(csv.reader(io.StringIO(_run([dvc, "exp", "show", "--only-changed", "--csv"], work))))
    shown = [name for name in header if name not in ("rev", "typ")]
    assert len(shown) <= 30, shown

    documented = refresh.documented(README.read_text())
    _compare_table("dvc metrics diff", documented["dvc metrics diff"], outputs["dvc metrics diff"])
    compare, result = _check_compare(work, 1)
    for text in (README.read_text(), PIPELINE.read_text()):
        _compare_compare(refresh.documented(text)[COMPARE], compare)
    assert result["experiments"][1]["params"] == {
        "identifiability.train.rho_beta": [0.99],
        "identifiability.train.reference_rho_beta": 0.99,
    }

    # Back to the baseline, then keep only the headline setting ρβ = 0.9: its numbers stay put.
    _run(["git", "checkout", "--", "."], work)
    _run([dvc, "exp", "run", "-S", "identifiability.train.rho_beta=[0.9]"], work, timeout=1800)
    assert _run([dvc, "metrics", "diff", "--json"], work).strip() in ("", "{}")
    header = next(csv.reader(io.StringIO(_run([dvc, "exp", "show", "--only-changed", "--csv"], work))))
    assert len([name for name in header if name not in ("rev", "typ")]) <= 30, header
    # Both experiments side by side: the second moved no headline, so its numbers are the baseline's.
    compare, result = _check_compare(work, 2)
    first, second = result["experiments"][1:]
    assert "rho_beta=[0.9]" in compare and second["params"] == {
        "identifiability.train.rho_beta": [0.9],
        "identifiability.train.reference_rho_beta": 0.9,  # every row holds every parameter that differs
    }
    assert second["headlines"] == result["experiments"][0]["headlines"] != first["headlines"]

    # The README's bug switch of the training audit: its verdict flips in metrics, compare and report.
    _run(["git", "checkout", "--", "."], work)
    _run([dvc, "exp", "run", "-S", f"training_audit.train.options.bug={BUG}"], work, timeout=1800)
    diff = json.loads(_run([dvc, "metrics", "diff", "--json"], work))["metrics/summary.json"]
    caught = diff["digits-training_audit.caught"]
    assert (caught["old"], caught["new"]) == (0, 1), diff
    compare = _run([str(BIN / "dpaudit"), "compare"], work).splitlines()
    assert compare[0].startswith("VERDICT CHANGED digits-training_audit (claimed ε"), compare
    assert "; not in " in compare[0] and max(map(len, compare)) <= COMPARE_WIDTH, compare
    report = (work / "reports" / "index.html").read_text(encoding="utf-8")
    assert f"bug = {BUG}" in report and "DOES NOT MATCH ITS DECLARED DP-SGD" in report
    assert f"-S training_audit.train.options.bug={BUG}`" in README.read_text()
