"""The report in a real browser: headless Chromium loads it without errors and every image decodes.

A copy of the page gets a small probe script at the top of ``<head>`` that records script errors,
failed resource loads and ``console.error`` calls, and on ``load`` writes a JSON marker (image
count, natural sizes, summary rows) into the DOM, which ``--dump-dom`` prints. Chromium's own
console log on stderr is scanned too. A deliberately broken page checks that the probe sees errors.
The screenshot is kept under ``tests/artifacts/`` for people to look at.
"""

from __future__ import annotations

import html
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dpaudit.report.screenshot import CHROMIUM_FLAGS

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
FLAGS = list(CHROMIUM_FLAGS)
PROBE = """<script>
window.__dpauditErrors = [];
window.addEventListener("error", function (e) {
  window.__dpauditErrors.push(String(e.message || (e.target && (e.target.src || e.target.href)) || "error"));
}, true);
(function () {
  var original = console.error;
  console.error = function () {
    window.__dpauditErrors.push(Array.prototype.join.call(arguments, " "));
    original.apply(console, arguments);
  };
})();
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var marker = document.createElement("pre");
  marker.id = "dpaudit-probe";
  marker.textContent = JSON.stringify({
    errors: window.__dpauditErrors,
    images: images.map(function (i) { return [i.complete, i.naturalWidth, i.naturalHeight]; }),
    summaryRows: Array.prototype.map.call(document.querySelectorAll("#summary tbody tr"),
                                          function (r) { return r.getAttribute("data-audit"); })
  });
  document.body.appendChild(marker);
});
</script>"""

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is missing (the Makefile's test set-up installs Debian's chromium)",
)


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    command = [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _probe(page: Path, tmp_path: Path) -> tuple[dict, str]:
    """Load ``page`` with the probe injected; return the probe's JSON and Chromium's stderr."""
    probed = tmp_path / f"probed-{page.name}"
    text = page.read_text(encoding="utf-8")
    probed.write_text(text.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    result = _chromium(
        ["--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
        tmp_path / "profile-dom",
    )
    found = re.search(r'<pre id="dpaudit-probe">(.*?)</pre>', result.stdout, re.S)
    assert (
        found
    ), f"probe marker missing; chromium exit {result.returncode}; stderr tail: {result.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1))), result.stderr


def _console_messages(stderr: str) -> list[str]:
    """Lines Chromium logs for the page's console (``...:INFO:CONSOLE...``) or uncaught exceptions."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def test_report_loads_without_errors_and_every_image_decodes(built_report, tmp_path):
    _, page, _ = built_report
    probe, stderr = _probe(page, tmp_path)
    assert probe["errors"] == []
    assert _console_messages(stderr) == []
    assert probe["summaryRows"] == ["adult-membership", "digits-identifiability"]
    # six section figures plus the region-of-privacy overview
    assert len(probe["images"]) == 7
    assert all(complete and width >= 400 and height >= 200 for complete, width, height in probe["images"])


def test_probe_detects_a_broken_page(tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><head><title>b</title></head><body>"
        '<img src="missing.png"><script>undefinedFunction();</script></body></html>'
    )
    probe, stderr = _probe(broken, tmp_path)
    assert len(probe["errors"]) == 2  # the failed image load and the uncaught ReferenceError
    assert probe["images"] == [[True, 0, 0]]
    assert any("Uncaught ReferenceError: undefinedFunction" in line for line in _console_messages(stderr))


def test_screenshot_is_kept_as_an_artifact(built_report, tmp_path):
    _, page, _ = built_report
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = tmp_path / "report.png"
    result = _chromium(
        ["--window-size=1280,4000", "--virtual-time-budget=5000", f"--screenshot={shot}", page.as_uri()],
        tmp_path / "profile-shot",
    )
    assert shot.is_file(), f"no screenshot; chromium exit {result.returncode}: {result.stderr[-2000:]}"
    shutil.copyfile(shot, ARTIFACTS / "report.png")
    with Image.open(io.BytesIO(shot.read_bytes())) as image:
        assert image.format == "PNG" and image.size == (1280, 4000)
        grey = np.asarray(image.convert("L"), dtype=float)
    # Non-trivial: text and plots make many distinct grey levels and dark pixels well spread down the page.
    assert len(np.unique(grey)) > 50
    dark_rows = np.flatnonzero((grey < 128).any(axis=1))
    assert dark_rows.size > 500 and dark_rows.max() > 2000


#: Writes, on load, the width each element needs (scrollWidth) and has (clientWidth) into the DOM.
LAYOUT_PROBE = """<script>
window.addEventListener("load", function () {
  function size(e) { return e ? [e.scrollWidth, e.clientWidth] : null; }
  var marker = document.createElement("pre");
  marker.id = "dpaudit-layout";
  marker.textContent = JSON.stringify({
    window: window.innerWidth,
    page: size(document.documentElement),
    body: size(document.body),
    summary: size(document.getElementById("summary"))
  });
  document.body.appendChild(marker);
});
</script>"""


def _layout(page: Path, tmp_path: Path, width: int = 1280) -> dict:
    """Widths that ``page`` needs and has at a ``width``-pixel window: page, body and the summary."""
    probed = tmp_path / f"layout-{page.name}"
    probed.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + LAYOUT_PROBE, 1))
    result = _chromium(
        [f"--window-size={width},2000", "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
        tmp_path / "profile-layout",
    )
    found = re.search(r'<pre id="dpaudit-layout">(.*?)</pre>', result.stdout, re.S)
    assert found, f"layout marker missing; chromium exit {result.returncode}: {result.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def _assert_fits(layout: dict) -> None:
    assert layout["window"] == 1280
    for name in ("page", "body", "summary"):
        needed, has = layout[name]
        assert needed <= has, f"{name} needs {needed} px but has {has} px: it scrolls sideways"


def test_summary_fits_1280_pixels_without_horizontal_overflow(fake_root, tmp_path):
    """Long settings, estimators, score labels and unbreakable words wrap inside the summary table."""
    from dpaudit.report.render import build_report

    path = fake_root / "data" / "bounds" / "adult-membership" / "section.json"
    raw = json.loads(path.read_text())
    long_words = " ".join(["a-setting-name-without-any-space-to-break-at_" * 3] * 3)
    raw["headline"].update(
        setting=long_words,
        epsilon_lower_estimator="an estimator described in a whole paragraph " * 12,
        epsilon_lower_assumes="an assumption described at length " * 8,
        epsilon_upper={f"accountant_{i}": 10.0 + i for i in range(8)},
        utility_name="a utility with a rather long name_" * 3,
    )
    raw["scores"] = {f"score_{i}": f"a long score label number {i} " * 3 for i in range(6)}
    raw["headline"]["scores"] = {f"score_{i}": 0.123456 * i for i in range(6)}
    raw["figures"] = []
    path.write_text(json.dumps(raw))
    out = fake_root / "reports" / "index.html"
    build_report(fake_root, out, fake_root / "metrics" / "summary.json", "t", audits=["adult-membership"])
    _assert_fits(_layout(out, tmp_path))


def test_layout_probe_sees_a_table_that_overflows(tmp_path):
    wide = tmp_path / "wide.html"
    cells = "".join(f"<td>{'x' * 40}</td>" for _ in range(40))
    wide.write_text(
        "<!DOCTYPE html><html><head><title>w</title></head><body>"
        f'<table id="summary"><tr>{cells}</tr></table></body></html>'
    )
    layout = _layout(wide, tmp_path)
    assert layout["page"][0] > layout["page"][1] and layout["body"][0] > layout["body"][1]
    with pytest.raises(AssertionError, match="scrolls sideways"):
        _assert_fits(layout)
