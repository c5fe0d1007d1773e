"""`dvc plots diff` draws every plot with no network: the repository's template inlines Vega.

DVC's stock page loads vega, vega-lite and vega-embed from a CDN, so offline it stays blank.
``.dvc/config`` names ``src/dpaudit/report/vega/dvc_plots.html`` instead, which carries the pinned
libraries inline. A copy of the working tree is committed to a fresh git repository and
``dvc plots diff`` (HEAD against the workspace) renders its committed plots; headless Chromium,
with every host name unresolvable and a dead proxy, loads the page with a probe at the top of
``<head>``. The probe wraps ``vegaEmbed`` as the library defines it and, once every embed has
settled, writes into the DOM (printed by ``--dump-dom``) each view's data marks counted in Vega's
scenegraph (items of marks with role ``mark``) and the inked pixels of its canvas. The same page
rendered with DVC's stock template is the negative control: nothing may draw there.
"""

from __future__ import annotations

import configparser
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.test_dvc_workflow import _copy_tree

from dpaudit.report.screenshot import CHROMIUM_FLAGS
from dpaudit.report.vega import build

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    *CHROMIUM_FLAGS,
    # No network: no host name resolves and any connection goes to a closed port.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
    "--proxy-server=127.0.0.1:9",
    "--window-size=1280,2000",
]
PROBE = """<script>
(function () {
  var probe = window.__dpauditPlots = {errors: [], embeds: []};
  window.addEventListener("error", function (e) {
    probe.errors.push(String(e.message || (e.target && (e.target.src || e.target.href)) || "error"));
  }, true);
  var original = console.error;
  console.error = function () {
    probe.errors.push(Array.prototype.join.call(arguments, " "));
    original.apply(console, arguments);
  };
  function marks(scene, out) {
    (scene.items || []).forEach(function (item) {
      if (scene.marktype === "group") (item.items || []).forEach(function (child) { marks(child, out); });
    });
    if (scene.role === "mark" && scene.marktype !== "group")
      out[scene.marktype] = (out[scene.marktype] || 0) + (scene.items || []).length;
    return out;
  }
  function inked(selector) {
    var canvas = document.querySelector(selector + " canvas");
    if (!canvas) return 0;
    var data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data, n = 0;
    for (var i = 0; i < data.length; i += 4)
      if (data[i + 3] > 0 && (data[i] < 200 || data[i + 1] < 200 || data[i + 2] < 200)) n++;
    return n;
  }
  var embed;
  Object.defineProperty(window, "vegaEmbed", {
    configurable: true,
    get: function () { return embed; },
    set: function (library) {
      embed = function (el, spec, options) {
        var result = library(el, spec, options);
        probe.embeds.push(result.then(
          function (r) { return {id: el, marks: marks(r.view.scenegraph().root, {}), ink: inked(el)}; },
          function (e) { return {id: el, error: String(e)}; }));
        return result;
      };
    }
  });
  window.addEventListener("load", function () {
    Promise.all(probe.embeds).then(function (views) {
      var marker = document.createElement("pre");
      marker.id = "dpaudit-plots";
      marker.textContent = JSON.stringify({errors: probe.errors, views: views});
      document.body.appendChild(marker);
    });
  });
})();
</script>"""

pytestmark = pytest.mark.timeout(600)
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is missing (the Makefile's test set-up installs Debian's chromium)",
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "DVC_NO_ANALYTICS": "1",
            "GIT_AUTHOR_NAME": "dpaudit test",
            "GIT_AUTHOR_EMAIL": "test@example.invalid",
            "GIT_COMMITTER_NAME": "dpaudit test",
            "GIT_COMMITTER_EMAIL": "test@example.invalid",
        }
    )
    return env


def _run(args: list[str], cwd: Path) -> str:
    result = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(args)} exited {result.returncode}\n{result.stderr[-4000:]}"
    return result.stdout


def _plot_ids() -> list[str]:
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))
    return [name for entry in spec.get("plots", []) for name in entry]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``dvc plots diff`` of a committed copy of the working tree: with the configured template
    (``ours``) and with DVC's stock one (``stock``)."""
    from dvc_render.html import PAGE_HTML

    root = tmp_path_factory.mktemp("dvc-plots")
    work = root / "repo"
    _copy_tree(work, with_outputs=True)  # the committed plots are what it draws
    _run(["git", "init", "-q"], work)
    _run(["git", "add", "-A"], work)
    _run(["git", "commit", "-q", "-m", "plots"], work)
    stock = root / "stock.html"
    stock.write_text(PAGE_HTML, encoding="utf-8")
    dvc = str(BIN / "dvc")
    _run([dvc, "plots", "diff", "-o", str(root / "ours")], work)
    _run([dvc, "plots", "diff", "-o", str(root / "stock"), "--html-template", str(stock)], work)
    return {"ours": root / "ours" / "index.html", "stock": root / "stock" / "index.html"}


def _load(page: Path, tmp_path: Path) -> dict:
    """Load ``page`` offline with the probe injected; the probe's JSON (errors, views)."""
    probed = tmp_path / f"probed-{page.parent.name}.html"
    text = page.read_text(encoding="utf-8")
    probed.write_text(text.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    command = [
        str(CHROMIUM),
        *FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        probed.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    found = re.search(r'<pre id="dpaudit-plots">(.*?)</pre>', result.stdout, re.S)
    assert found, f"probe marker missing; chromium exit {result.returncode}: {result.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def test_dvc_config_names_the_committed_template_relative_to_the_repository():
    config = configparser.ConfigParser()
    config.read(REPO / ".dvc" / "config", encoding="utf-8")
    configured = config.get("plots", "html_template")
    assert not Path(configured).is_absolute()
    # DVC resolves a relative html_template against the .dvc folder.
    assert (REPO / ".dvc" / configured).resolve() == build.TEMPLATE
    assert build.verify() == []


def test_verify_finds_a_changed_library(tmp_path):
    text = build.TEMPLATE.read_text(encoding="utf-8")
    changed = tmp_path / "dvc_plots.html"
    changed.write_text(text.replace('var e="5.20.2"', 'var e="5.20.3"', 1), encoding="utf-8")
    assert build.verify(changed) == [
        f"vega@5.20.2: inlined code differs from package/build/vega.min.js of {build.LIBRARIES[0].url}"
    ]


def test_page_loads_no_script_from_elsewhere_and_embeds_every_plot(pages):
    text = pages["ours"].read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]*\ssrc=", text)
    assert re.findall(r"vegaEmbed\('#([^']+)'", text) == _plot_ids()
    assert re.search(r"<script[^>]*\ssrc=\"https://cdn", pages["stock"].read_text(encoding="utf-8"))


@needs_chromium
def test_every_plot_draws_marks_without_network(pages, tmp_path):
    probe = _load(pages["ours"], tmp_path)
    assert probe["errors"] == []
    views = {view["id"].removeprefix("#"): view for view in probe["views"]}
    assert list(views) == _plot_ids()
    for name, view in views.items():
        assert "error" not in view, (name, view)
        assert sum(view["marks"].values()) > 0, (name, view)
        assert view["ink"] > 1000, (name, view)


@needs_chromium
def test_stock_template_draws_nothing_without_network(pages, tmp_path):
    """The negative control: DVC's own page fetches Vega from a CDN, which the browser cannot reach."""
    probe = _load(pages["stock"], tmp_path)
    assert probe["views"] == []
    assert any("cdn.jsdelivr.net" in error for error in probe["errors"]), probe["errors"]
    assert any("vegaEmbed is not" in error for error in probe["errors"]), probe["errors"]
