"""The HTML report and metrics/summary.json built from fake sections."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from dpaudit.config import ParamsError
from dpaudit.report.figures import FigureError
from dpaudit.report.inputs import LoadedSection
from dpaudit.report.render import build_report, config_from_params, format_value, git_commit
from dpaudit.results import ReportSection, TableSpec


class _Collector(HTMLParser):
    """Collects summary-table rows, section ids, image sources and every URL-bearing attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.summary_rows: list[str] = []
        self.sections: list[str] = []
        self.images: list[str] = []
        self.urls: list[str] = []
        self._in_summary = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "summary":
            self._in_summary = True
        if tag == "tr" and self._in_summary and "data-audit" in a:
            self.summary_rows.append(a["data-audit"] or "")
        if tag == "section" and "data-audit" in a:
            self.sections.append(a["data-audit"] or "")
        if tag == "img":
            self.images.append(a.get("src") or "")
        for name in ("src", "href", "action", "srcset", "poster", "data"):
            if a.get(name):
                self.urls.append(a[name] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_summary = False


def _read(out: Path, summary: Path) -> tuple[str, dict, _Collector]:
    page = out.read_text(encoding="utf-8")
    parser = _Collector()
    parser.feed(page)
    return page, json.loads(summary.read_text()), parser


def _build(root: Path) -> tuple[str, dict, _Collector]:
    out = root / "reports" / "index.html"
    summary = root / "metrics" / "summary.json"
    build_report(root, out, summary, "fake <report>", audits=["adult-membership", "digits-identifiability"])
    return _read(out, summary)


def test_every_section_and_one_summary_row_per_dataset_experiment(built_report):
    page, _, parsed = _read(*built_report[1:])
    assert parsed.sections == ["adult-membership", "digits-identifiability"]
    assert parsed.summary_rows == ["adult-membership", "digits-identifiability"]
    # One headline per row: ε proven with its short tag (the estimator is the tooltip), ε promised by
    # the tightest accountant (PLD 11.1 of rdp 12, pld 11.1, …), their ratio, the audited model's utility.
    summary = page[page.index('id="summary"') : page.index("</table>", page.index('id="summary"'))]
    head = summary[: summary.index("</thead>")]
    for column in ("ε proven", "ε promised", "proven / promised", "utility (audited model)"):
        assert f">{column}</th>" in head
    assert "estimator</th>" not in head and "assumes</th>" not in head
    assert '0.8<span class="tag" title="loss-threshold (split); assumes: independent fair-coin inclusion">' \
        "random inclusion</span>" in summary
    every = "rdp: 12 · pld: 11.1 · naive: 125 · advanced: 40"
    assert f'11.1<span class="tag" title="{every}">PLD</span>' in summary
    assert f"<td>{0.8 / 11.1:.3g}</td>" in summary
    assert '0.81<span class="tag">accuracy</span>' in summary
    assert "ρβ: <b>0.9</b>" in summary and "ρα: <b>0.23</b>" in summary and "Epsilon*: <b>0.42</b>" in summary
    assert "Adv and δ′ by sensitivity × neighbours" in page and "Bernau Table 2 layout" in page


def test_self_contained_and_escaped(built_report):
    page, _, parsed = _read(*built_report[1:])
    assert all(url.startswith(("data:image/png;base64,", "#")) for url in parsed.urls), parsed.urls
    # Nothing is loaded from elsewhere: no URL attributes but inline images and anchors (checked above),
    # no CSS url()/@import, no scripts, links, frames or embeds. Dataset source URLs appear as plain text.
    assert not re.search(r"url\(|@import|<script|<link|<iframe|<object|<embed", page)
    assert "https://" in page[page.index('id="provenance"') :]
    assert "<title>fake &lt;report&gt;</title>" in page
    assert "D vs D&#x27; &lt;chosen by sensitivity&gt;" in page


def test_images_decode_one_per_figure_plus_region_of_privacy(built_report):
    _, _, parsed = _read(*built_report[1:])
    paths = (built_report[0] / "data" / "bounds").glob("*/section.json")
    figures = sum(len(ReportSection.load(p).figures) for p in paths)
    assert len(parsed.images) == figures + 1
    for src in parsed.images:
        with Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1], validate=True))) as image:
            image.load()
            assert image.format == "PNG" and image.width >= 400 and image.height >= 200


def test_summary_json_numbers_only(built_report):
    _, summary, _ = _read(*built_report[1:])
    assert summary["adult-membership"] == {
        "epsilon_upper": {"rdp": 12.0, "pld": 11.1, "naive": 125.0, "advanced": 40.0},
        "epsilon_lower": 0.8,
        "epsilon_star": 0.42,
        "utility": 0.81,
        "utility_measure": "accuracy",
    }
    assert summary["digits-identifiability"]["rho_beta"] == 0.9
    assert summary["digits-identifiability"]["epsilon_upper"]["pld"] == pytest.approx(2.2 * 0.97)
    assert "epsilon_star" not in summary["digits-identifiability"]

    def leaves(value):
        if isinstance(value, dict):
            for inner in value.values():
                yield from leaves(inner)
        else:
            yield value

    numbers = [v for v in leaves(summary) if not isinstance(v, str)]  # strings: assumption, measure
    assert all(type(v) in (int, float) and math.isfinite(v) for v in numbers)


def test_non_finite_scores_are_left_out_of_summary_and_shown_as_infinity(fake_root):
    path = fake_root / "data" / "bounds" / "adult-membership" / "section.json"
    raw = json.loads(path.read_text())
    raw["headline"]["epsilon_upper"] = {"rdp": None, "naive": float("inf")}
    raw["figures"] = []  # not needed here; keeps the test fast
    path.write_text(json.dumps(raw))
    page, summary, _ = _build(fake_root)
    assert "epsilon_upper" not in summary["adult-membership"]
    summary = page[page.index('id="summary"') : page.index("</table>", page.index('id="summary"'))]
    # No finite upper bound: ∞ promised (every accountant in the tooltip), no ratio.
    assert '<td>∞<span class="tag" title="rdp: — · naive: ∞">no finite bound</span></td><td>—</td>' in summary


def test_renders_only_the_listed_audits_and_names_a_missing_one(fake_root):
    """A stale section of an audit no longer in params.yaml is not rendered; a listed one must exist."""
    out, summary = fake_root / "reports" / "index.html", fake_root / "metrics" / "summary.json"
    build_report(fake_root, out, summary, "t", audits=["digits-identifiability"])
    page, data, parsed = _read(out, summary)
    assert parsed.sections == ["digits-identifiability"] and list(data) == ["digits-identifiability"]
    build_report(fake_root, out, summary, "t", audits=[])
    assert json.loads(summary.read_text()) == {}
    with pytest.raises(FileNotFoundError, match="mnist-membership"):
        build_report(fake_root, out, summary, "t", audits=["mnist-membership"])


def test_summary_columns_are_the_scores_sections_declare(fake_root):
    """A section's declared headline scores appear in its summary row (one short line each) and in
    summary.json; a rate observed as 0 is shown with its interval from ``<key>_upper``."""
    path = fake_root / "data" / "bounds" / "adult-membership" / "section.json"
    raw = json.loads(path.read_text())
    raw["scores"] = {"tpr_at_1pct": "TPR @ 1% FPR"}
    raw["headline"]["scores"] = {"tpr_at_1pct": 0.31}
    raw["figures"] = []
    path.write_text(json.dumps(raw))
    page, summary, _ = _build(fake_root)
    cells = page[page.index('id="summary"') : page.index("</table>", page.index('id="summary"'))]
    assert "TPR @ 1% FPR: <b>0.31</b>" in cells and "Epsilon*" not in cells
    assert summary["adult-membership"]["tpr_at_1pct"] == 0.31
    assert "epsilon_star" not in summary["adult-membership"]
    raw["scores"] = {"tpr": "attack TPR @ 1 % FPR", "tpr_upper": "its upper limit where 0 was observed"}
    raw["headline"]["scores"] = {"tpr": 0.0, "tpr_upper": 0.0031}
    path.write_text(json.dumps(raw))
    page, summary, _ = _build(fake_root)
    cells = page[page.index('id="summary"') : page.index("</table>", page.index('id="summary"'))]
    assert "attack TPR @ 1 % FPR: <b>0 [0, 0.0031]</b>" in cells and "its upper limit" not in cells
    assert summary["adult-membership"]["tpr"] == 0.0 and summary["adult-membership"]["tpr_upper"] == 0.0031


def test_provenance(built_report):
    page, _, _ = _read(*built_report[1:])
    provenance = page[page.index('id="provenance"') :]
    assert hashlib.sha256(b"39, State-gov, 77516, Bachelors\n").hexdigest() in provenance
    assert "matches registry (size, sha256)" in provenance  # the vendored adult.names.gz
    assert "MISMATCH: size 32 ≠ 220798; sha256" in provenance  # the fake adult.test.gz
    assert "data/raw/adult/adult.names.gz" in provenance and "manifest.json" not in provenance
    assert "CC BY 4.0" in provenance and "ships with sklearn" in provenance
    assert "title: fake &lt;report&gt;" in provenance  # params.yaml content
    # the train time the membership section recorded from its train manifest, and the total
    assert ">train@adult-membership<" in provenance and "<td>12.5</td>" in provenance
    for package in (
        "tensorflow",
        "tensorflow-privacy",
        "dp-accounting",
        "dvc",
        "numpy",
        "scikit-learn",
        "xgboost",
    ):
        assert f'<td class="text">{package}</td>' in provenance
    assert "not a git repository" in provenance
    assert "results/adult-membership.json (2 numbers)" in page


def test_empty_root_still_renders(tmp_path):
    out, summary_path = tmp_path / "reports" / "index.html", tmp_path / "metrics" / "summary.json"
    build_report(tmp_path, out, summary_path, "fake <report>", audits=[])
    page, summary, parsed = _read(out, summary_path)
    assert summary == {}
    assert parsed.sections == [] and "No audits" in page
    assert "No downloaded datasets under data/raw/" in page and "No params.yaml found" in page


def test_bad_inputs_name_the_file(fake_root):
    path = fake_root / "data" / "bounds" / "adult-membership" / "section.json"
    section = ReportSection.load(path)
    bad_table = TableSpec("t", "T", ["a", "b"], [[1, 2], [3]])
    ReportSection(**{**section.__dict__, "tables": [bad_table]}).save(path)
    with pytest.raises(ValueError, match="adult-membership: table 't' row 1 has 1 cells for 2 columns"):
        _build(fake_root)
    (fake_root / "plots" / "adult-membership" / "roc.csv").unlink()
    ReportSection(**{**section.__dict__, "tables": []}).save(path)
    with pytest.raises(
        FigureError, match=r"adult-membership/section\.json: figure 'roc'.*roc\.csv does not exist"
    ):
        _build(fake_root)
    path.write_text('{"dataset": "adult"}')
    with pytest.raises(ValueError, match=r"adult-membership/section\.json is not a valid report section"):
        _build(fake_root)
    assert not (fake_root / "reports" / "index.html").exists()


def test_format_and_config():
    assert [format_value(v) for v in (None, 0.123456, 3.5e8, float("inf"), 7, "a<b")] == [
        "—",
        "0.1235",
        "3.5e+08",
        "∞",
        "7",
        "a&lt;b",
    ]
    assert config_from_params({"report": {"title": "T"}}).title == "T"
    with pytest.raises(ParamsError, match="report.titel"):
        config_from_params({"report": {"titel": "T"}})
    with pytest.raises(ParamsError, match="report.title"):
        config_from_params({"report": {"title": " "}})


def test_git_commit_and_dirty_flag(tmp_path):
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    run = {"cwd": tmp_path, "check": True, "capture_output": True, "env": {**os.environ, **env}}
    subprocess.run(["git", "init", "-q"], **run)
    assert git_commit(tmp_path) is None  # no commit yet
    (tmp_path / "params.yaml").write_text("a: 1\n")
    subprocess.run(["git", "add", "params.yaml"], **run)
    subprocess.run(["git", "commit", "-q", "-m", "x"], **run)
    head = subprocess.run(["git", "rev-parse", "HEAD"], **run).stdout.decode().strip()
    assert git_commit(tmp_path) == head and re.fullmatch(r"[0-9a-f]{40}", head)
    (tmp_path / "params.yaml").write_text("a: 2\n")
    assert git_commit(tmp_path) == f"{head} + uncommitted changes"


def _loaded(dataset: str, lower: float | None, upper: float) -> LoadedSection:
    from dpaudit.results import ReportSection, SummaryRow

    row = SummaryRow("s", {"pld": upper}, lower, "one-run")
    return LoadedSection(f"{dataset}-x", Path("."), ReportSection(dataset, "x", "t", "", row, [row], [], []))


def test_the_summary_opens_with_a_sentence_to_act_on() -> None:
    from dpaudit.report.summary import summary_sentence

    text = summary_sentence([_loaded("adult", 1.4, 2.0), _loaded("digits", 0.5, 4.0), _loaded("c", 0.0, 1.0)])
    assert text.startswith("2 of 3 audits proved a positive ε lower bound")
    assert "adult x: ε ≥ 1.4, 70 % of the accountant's ε" in text and "No claim is in doubt" in text
    doubt = summary_sentence([_loaded("adult", 3.0, 2.0), _loaded("digits", 0.5, 4.0)])
    assert "Claim in doubt: adult x (proven 3 > promised 2)" in doubt and "digits x (" not in doubt
    assert summary_sentence([_loaded("c", 0.0, 1.0)]).startswith("None of the 1 audits proved")
