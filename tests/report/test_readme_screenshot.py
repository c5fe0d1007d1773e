"""The README shows current numbers: its screenshot was rendered from the current metrics/summary.json,
and the numbers its text quotes from the headlines match that file.

Both compare by value, not by bytes: a value matches when it is the same within the precision it is
written with, one unit in its last digit (``1.44`` matches 1.4430…, ``≈ 2.2`` matches 2.197…, a lower
bound rounded down to 1.42 matches 1.4265…), and the utility may be written as
``utility: {name: value}`` or as ``utility: value`` with ``utility_measure: name``. The screenshot is
regenerated with ``python -m dpaudit.report.screenshot`` (docs/development.md). The README's
``<!-- output: … -->`` blocks are checked by tests/test_readme_compare.py, not here.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from dpaudit.report.screenshot import (
    SHA_KEY,
    SOURCE_KEY,
    SUMMARY_KEY,
    agrees,
    normalise,
    page_differences,
    recorded_summary,
    shown_headlines,
    summary_differences,
    summary_part,
    take_screenshot,
)

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SCREENSHOT = REPO / "docs" / "img" / "report.png"
SUMMARY = REPO / "metrics" / "summary.json"
REGENERATE = "python -m dpaudit.report.screenshot (after the report stage)"

#: Numbers in the README's prose that are not headline results of metrics/summary.json, by the phrase
#: around them, and why. A number in neither this nor QUOTES must match some headline value.
NOT_HEADLINES = {
    "ρβ = 0.99": "the setting the compare example switches to, not a result",
    "ln 99 ≈ 4.6": "the ε of the compare example's changed run, not of the default run",
    "claims ε = 2": "the ε the demo's own training declares",
}
#: Headline quotes: the phrase around the number, and the metrics/summary.json leaves it quotes
#: (``audit.key[.sub]``; one of them must match).
QUOTES = {
    "ln 9 ≈ 2.2": ("adult-identifiability.epsilon_upper.rdp", "digits-identifiability.epsilon_upper.rdp"),
}
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")
_AFTER_RELATION = re.compile(r"(?:≈|[εβα*′]\s*[=≥≤])\s*(\d+(?:\.\d+)?)(?![\w.])")


def prose(markdown: str) -> str:
    """The README's text: without code blocks, the generated output blocks, inline code, HTML
    comments and link targets (spaces of the same length keep positions)."""
    blank = lambda m: re.sub(r"\S", " ", m.group(0))  # noqa: E731
    for pattern in (r"<!-- output:.*?<!-- /output -->", r"```.*?```", r"<!--.*?-->", r"`[^`\n]*`",
                    r"\]\([^)]*\)"):  # fmt: skip
        markdown = re.sub(pattern, blank, markdown, flags=re.S)
    return markdown


def quoted_numbers(text: str) -> list[tuple[str, str | None]]:
    """(number as written, the QUOTES or NOT_HEADLINES phrase it is part of, if any) of every decimal
    and every number after ≈ or "ε =" in ``text``."""
    spans = [(m.start(), m.end(), phrase) for phrase in (*QUOTES, *NOT_HEADLINES)
             for m in re.finditer(re.escape(phrase), text)]  # fmt: skip
    found = {(m.start(), m.group(0)) for m in _DECIMAL.finditer(text)}
    found |= {(m.start(1), m.group(1)) for m in _AFTER_RELATION.finditer(text)}
    return [
        (number, next((p for a, b, p in spans if a <= start < b), None)) for start, number in sorted(found)
    ]


def _numeric_leaves(summary: dict) -> dict[str, float]:
    return {k: float(v) for k, v in normalise(summary).items() if isinstance(v, int | float)}


def test_the_readme_text_quotes_the_current_headlines():
    leaves = _numeric_leaves(json.loads(SUMMARY.read_text()))
    numbers = quoted_numbers(prose(README.read_text(encoding="utf-8")))
    assert numbers, "no numbers found in the README's text: has the extraction broken?"
    wrong = []
    for number, phrase in numbers:
        if phrase in NOT_HEADLINES:
            continue
        keys = QUOTES.get(phrase or "", tuple(leaves))
        if not any(key in leaves and agrees(number, leaves[key]) for key in keys):
            closest = min(leaves, key=lambda k: abs(leaves[k] - float(number)))
            wrong.append(f"{number!r} ({phrase or 'no phrase'}): closest {closest} = {leaves[closest]:.4g}")
    assert wrong == [], (
        "README.md quotes numbers that metrics/summary.json does not hold (fix the text, or list a "
        "number that is no headline in NOT_HEADLINES):\n" + "\n".join(wrong)
    )


def test_the_readme_number_check_sees_quotes_and_wrong_numbers():
    text = prose(
        "ε = ln 9 ≈ 2.2 and ρβ = 0.99; `ε = 7.77` in code\n```\n9.99\n```\n"
        "<!-- output: x -->\n8.88\n<!-- /output -->\nthe proven ε = 1.43 and [a](v1.5.html)"
    )
    assert quoted_numbers(text) == [("2.2", "ln 9 ≈ 2.2"), ("0.99", "ρβ = 0.99"), ("1.43", None)]
    assert agrees("2.2", 2.1972) and not agrees("2.3", 2.1972)
    assert agrees("1.43", 1.4265) and not agrees("1.44", 1.4265)


def test_the_screenshot_was_rendered_from_the_current_summary():
    recorded = recorded_summary(SCREENSHOT)
    assert recorded is not None, f"{SCREENSHOT} records no summary: regenerate it with {REGENERATE}"
    differences = summary_differences(recorded, json.loads(SUMMARY.read_text()))
    assert differences == [], (
        f"{SCREENSHOT} shows numbers that are not those of metrics/summary.json; regenerate it with "
        f"{REGENERATE}:\n" + "\n".join(differences)
    )
    assert f"]({SCREENSHOT.relative_to(REPO)})" in README.read_text(encoding="utf-8")


def test_summaries_compare_by_value_and_in_either_utility_form():
    old = {"a": {"epsilon_lower": 1.4430643, "epsilon_upper": {"rdp": 2.19722},
                 "utility": {"accuracy": 0.78039}, "epsilon_lower_assumes": "gaussian"}}  # fmt: skip
    rounded = {"a": {"epsilon_lower": 1.44, "epsilon_upper": {"rdp": 2.2}, "utility": 0.78,
                     "utility_measure": "accuracy", "epsilon_lower_assumes": "gaussian"}}  # fmt: skip
    assert normalise(old) == {"a.epsilon_lower": 1.4430643, "a.epsilon_upper.rdp": 2.19722,
                              "a.utility_measure": "accuracy", "a.utility": 0.78039,
                              "a.epsilon_lower_assumes": "gaussian"}  # fmt: skip
    assert summary_differences(old, rounded) == []
    # A lower bound rounded down (1.4265 → 1.42) is still the number the page shows as 1.43.
    assert agrees("1.43", 1.42) and agrees(1.4265444, 1.42) and not agrees(1.4265444, 1.41)
    moved = json.loads(json.dumps(rounded))
    moved["a"]["epsilon_lower"] = 1.47
    moved["a"]["utility_measure"] = "AUROC"
    moved["b"] = {"epsilon_lower": 0.5}
    assert summary_differences(old, moved) == [
        "b.epsilon_lower: not in the screenshot",
        "a.epsilon_lower: screenshot 1.4430643, now 1.47",
        "a.utility_measure: screenshot 'accuracy', now 'AUROC'",
    ]


def test_the_page_must_show_the_summary_it_is_recorded_with(built_report):
    _, page_path, summary_path = built_report
    page, summary = page_path.read_text(encoding="utf-8"), json.loads(summary_path.read_text())
    shown = shown_headlines(page)
    assert shown["adult-membership"] == {"epsilon_lower": "0.8", "epsilon_upper": "11.1", "ratio": "0.0721",
                                         "utility": "0.81"}  # fmt: skip
    assert page_differences(page, summary) == []
    stale = json.loads(json.dumps(summary))
    stale["adult-membership"]["epsilon_lower"] = 0.95
    assert page_differences(page, stale) == [
        "adult-membership.epsilon_lower: the page shows 0.8, metrics/summary.json has 0.95"
    ]
    part = summary_part(page)
    assert 'id="summary"' in part and "region-of-privacy" not in part and part.endswith("</html>\n")


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is missing (apt-get install chromium)")
def test_the_screenshot_shows_the_summary_and_records_its_numbers(built_report, tmp_path):
    _, page_path, summary_path = built_report
    text = {SUMMARY_KEY: json.dumps(json.loads(summary_path.read_text())), SHA_KEY: "x", SOURCE_KEY: "p"}
    out = take_screenshot(page_path.read_text(encoding="utf-8"), tmp_path / "shot.png", text)
    assert recorded_summary(out) == json.loads(summary_path.read_text())
    with Image.open(out) as image:
        assert image.width == 1280 and 400 < image.height < 1500  # the summary, not the whole page
        grey = image.convert("L")
        bottom = grey.crop((0, image.height - 20, image.width, image.height))
        assert bottom.getextrema()[0] > 240  # cropped just below the table, with a blank margin
        assert grey.crop((0, image.height - 80, image.width, image.height - 20)).getextrema()[0] < 128
