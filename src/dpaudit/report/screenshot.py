"""Regenerate the README's screenshot, ``docs/img/report.png``, from the current report.

    python -m dpaudit.report.screenshot            # reports/index.html → docs/img/report.png (a few s)

The README shows the top of the report: its title, contents and the whole summary table. The page is
cut after that table (so the 5 MB of inline figures below need not load), rendered in headless
Chromium at 1280 px wide, the blank below the table is cropped and the colours are reduced to a
256-colour palette (a third of the size, text still sharp). Nothing is rebuilt: it reads
the report the ``report`` stage wrote, so rerun that stage first when its inputs changed.

Before drawing, the numbers the page's summary shows (ε proven, ε promised and the utility, per
audit) are checked against ``metrics/summary.json`` (a page older than the metrics is refused), and
the PNG records what it shows in tEXt chunks: that file's values (:data:`SUMMARY_KEY`) and sha256.
``tests/report/test_readme_screenshot.py`` compares them with the current ``metrics/summary.json``
by value (:func:`summary_differences`), so the screenshot fails a test as soon as it shows numbers
that are no longer the current ones, but not when the file is only reformatted or rounded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, PngImagePlugin

#: tEXt keys of the screenshot: the summary's values (JSON), its sha256, the page it was drawn from.
SUMMARY_KEY = "dpaudit:summary"
SHA_KEY = "dpaudit:summary-sha256"
SOURCE_KEY = "dpaudit:source"
WIDTH = 1280  # px, the window the README's screenshot is taken at
MARGIN = 24  # px of page kept below the summary table
SHOWN_DIGITS = 3  # significant digits of the summary's numbers (dpaudit.report.summary.number)
#: Headless Chromium on a machine with a closed network (the tests that render pages use these too).
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--hide-scrollbars",
    "--disable-dev-shm-usage",
)  # fmt: skip
_NUMBER = re.compile(r"[−-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?|∞")


class ScreenshotError(RuntimeError):
    """The screenshot cannot be made: no browser, no summary table, or a page older than the metrics."""


def printed_unit(value: float | str) -> float:
    """One unit in the last digit ``value`` is written with: 0.01 for ``"1.44"`` or ``1.44``, 0.1
    for ``"2.2"``; a float is read as its shortest ``repr`` (every digit it has)."""
    text = value if isinstance(value, str) else repr(float(value))
    exponent = Decimal(text.replace("−", "-").replace("∞", "Infinity")).as_tuple().exponent
    return 10.0 ** int(exponent) if isinstance(exponent, int) else 0.0


def agrees(a: float | str, b: float | str, digits: int | None = None) -> bool:
    """Whether two numbers are the same within the precision the coarser of them is written with:
    one unit in its last digit (or of the ``digits``-th significant digit, when coarser), so that a
    number rounded to nearest (the page's "1.43") and one rounded outward (a lower bound of 1.4265
    written down as 1.42 in metrics/summary.json) agree, while 1.44 and 1.4265 do not."""
    x, y = (float(str(v).replace("−", "-").replace("∞", "inf")) for v in (a, b))
    if math.isinf(x) or math.isinf(y):
        return x == y
    unit = max(printed_unit(a), printed_unit(b))
    if digits is not None and max(abs(x), abs(y)) > 0:
        unit = max(unit, 10.0 ** (math.floor(math.log10(max(abs(x), abs(y)))) - digits + 1))
    return abs(x - y) <= unit * (1 + 1e-9)


def normalise(summary: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``metrics/summary.json`` as flat ``audit.key[.sub]`` leaves, the utility in one form:
    ``utility: {name: value}`` and ``utility: value`` with ``utility_measure: name`` both become
    ``utility`` and ``utility_measure`` leaves."""
    flat: dict[str, Any] = {}
    for audit, entry in summary.items():
        for key, value in entry.items():
            if key == "utility" and isinstance(value, Mapping):
                ((measure, value),) = value.items()
                flat[f"{audit}.utility_measure"] = measure
                flat[f"{audit}.utility"] = value
            elif isinstance(value, Mapping):
                flat.update({f"{audit}.{key}.{sub}": v for sub, v in value.items()})
            else:
                flat[f"{audit}.{key}"] = value
    return flat


def summary_differences(shown: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between two summaries by value: keys only in one, strings that differ, and
    numbers that differ beyond the precision either is written with (or its 3 shown digits)."""
    a, b = normalise(shown), normalise(current)
    out = [f"{key}: only in the screenshot" for key in sorted(a.keys() - b.keys())]
    out += [f"{key}: not in the screenshot" for key in sorted(b.keys() - a.keys())]
    for key in sorted(a.keys() & b.keys()):
        x, y = a[key], b[key]
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y))
        if (numeric and not agrees(x, y, SHOWN_DIGITS)) or (not numeric and x != y):
            out.append(f"{key}: screenshot {x!r}, now {y!r}")
    return out


class _SummaryCells(HTMLParser):
    """The cell texts (tags' tooltips left out) of each row of the table ``id="summary"``."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self._table = False
        self._row: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "summary":
            self._table = True
        elif tag == "tr" and self._table and a.get("data-audit"):
            self._row = a["data-audit"]
            self.rows[self._row] = []
        elif tag == "td" and self._row:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table, self._row = False, None
        elif tag == "td" and self._row and self._cell is not None:
            self.rows[self._row].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self._cell:  # the value: the cell's first text, before its tag
            self._cell.append(data)


def _first_number(text: str) -> str | None:
    found = _NUMBER.match(text.strip())
    return found.group(0) if found else None


def shown_headlines(page: str) -> dict[str, dict[str, str | None]]:
    """Per audit, the numbers the summary table shows as written: ε proven, ε promised, utility."""
    parser = _SummaryCells()
    parser.feed(page)
    if not parser.rows:
        raise ScreenshotError('the page has no summary table (<table id="summary"> with data-audit rows)')
    names = ("epsilon_lower", "epsilon_upper", "ratio", "utility")
    return {audit: dict(zip(names, map(_first_number, cells[1:5]), strict=True)) for audit, cells in
            parser.rows.items()}  # fmt: skip


def page_differences(page: str, summary: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Where the page's summary table does not show the numbers of ``summary`` (metrics/summary.json)."""
    shown = shown_headlines(page)
    out = [f"{audit}: in metrics/summary.json, not in the page" for audit in summary.keys() - shown.keys()]
    for audit in sorted(summary.keys() & shown.keys()):
        flat = normalise({audit: summary[audit]})
        uppers = [float(v) for k, v in flat.items() if k.startswith(f"{audit}.epsilon_upper.")]
        expected = {
            "epsilon_lower": flat.get(f"{audit}.epsilon_lower"),
            "epsilon_upper": min(uppers) if uppers else None,
            "utility": flat.get(f"{audit}.utility"),
        }
        for key, value in expected.items():
            text = shown[audit][key]
            if text == "∞" and value is None:  # no finite accountant: summary.json leaves it out
                continue
            if (value is None) != (text is None) or (
                value is not None and text is not None and not agrees(text, value, SHOWN_DIGITS)
            ):
                out.append(f"{audit}.{key}: the page shows {text}, metrics/summary.json has {value}")
    return out


def summary_part(page: str) -> str:
    """The page up to the end of its summary table: what the README's screenshot shows."""
    start = page.find('id="summary"')
    end = page.find("</table>", start)
    if start < 0 or end < 0:
        raise ScreenshotError('the page has no summary table (<table id="summary">)')
    return page[: end + len("</table>")] + "</section>\n</body></html>\n"


def find_chromium(name: str | None = None) -> str:
    for candidate in (name, "chromium", "chromium-browser", "google-chrome"):
        if candidate and (found := shutil.which(candidate)):
            return found
    raise ScreenshotError("no Chromium found: install it (apt-get install -y chromium) or pass --chromium")


def _render(html_path: Path, png: Path, height: int, chromium: str, profile: Path) -> np.ndarray:
    command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},{height}",
               "--virtual-time-budget=3000", f"--screenshot={png}", html_path.as_uri()]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if not png.is_file():
        tail = result.stderr[-1500:]
        raise ScreenshotError(f"chromium wrote no screenshot (exit {result.returncode}): {tail}")
    with Image.open(png) as image:
        return np.asarray(image.convert("RGB"))


def take_screenshot(page: str, out: Path, text: Mapping[str, str], chromium: str | None = None) -> Path:
    """Render the summary part of ``page`` and write it to ``out`` as a PNG carrying ``text`` chunks."""
    browser = find_chromium(chromium)
    with tempfile.TemporaryDirectory(prefix="dpaudit-screenshot-") as tmp:
        html_path = Path(tmp) / "summary.html"
        html_path.write_text(summary_part(page), encoding="utf-8")
        height = 2000
        while True:  # a taller window until the page ends inside it
            pixels = _render(html_path, Path(tmp) / "shot.png", height, browser, Path(tmp) / "profile")
            inked = np.flatnonzero((pixels < 245).any(axis=(1, 2)))
            bottom = int(inked.max()) + 1 if inked.size else 0
            if bottom < height - MARGIN or height >= 16000:
                break
            height *= 2
        info = PngImagePlugin.PngInfo()
        for key, value in text.items():
            if value.isascii():
                info.add_text(key, value)
            else:
                info.add_itxt(key, value)
        out.parent.mkdir(parents=True, exist_ok=True)
        shot = Image.fromarray(pixels[: min(bottom + MARGIN, height)])
        # a 256-colour palette keeps anti-aliased text legible at a third of the RGB file's size
        shot.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, pnginfo=info, optimize=True)
    return out


def screenshot_text(summary_path: Path, source: str) -> dict[str, str]:
    """The tEXt chunks recording what the screenshot shows (see the module's text)."""
    raw = summary_path.read_bytes()
    values = json.loads(raw)
    return {
        SUMMARY_KEY: json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=True),
        SHA_KEY: hashlib.sha256(raw).hexdigest(),
        SOURCE_KEY: source,
    }


def recorded_summary(png: Path) -> dict[str, Any] | None:
    """The summary values ``png`` records it was rendered from, or None when it records none."""
    with Image.open(png) as image:
        chunks: Mapping[str, Any] = getattr(image, "text", {}) or {}
    return json.loads(chunks[SUMMARY_KEY]) if SUMMARY_KEY in chunks else None


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpaudit.report.screenshot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--report", type=Path, default=Path("reports/index.html"))
    parser.add_argument("--summary", type=Path, default=Path("metrics/summary.json"))
    parser.add_argument("--out", type=Path, default=Path("docs/img/report.png"))
    parser.add_argument("--chromium", help="the browser to run (default: chromium on PATH)")
    args = parser.parse_args(None if argv is None else list(argv))
    page = args.report.read_text(encoding="utf-8")
    differences = page_differences(page, json.loads(args.summary.read_text()))
    if differences:
        raise SystemExit(
            f"{args.report} does not show the numbers of {args.summary} (rerun the report stage first):\n  "
            + "\n  ".join(differences)
        )
    out = take_screenshot(page, args.out, screenshot_text(args.summary, str(args.report)), args.chromium)
    with Image.open(out) as image:
        print(f"wrote {out} ({image.width}×{image.height} px) from {args.report} and {args.summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
