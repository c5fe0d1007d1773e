"""The audit report: one self-contained HTML file and a JSON file of headline numbers.

:func:`build_report` reads ``data/bounds/<audit>/section.json`` (a
:class:`~dpaudit.report.spec.ReportSection`) of exactly the audits it is given (the ``audits`` of
params.yaml, in the pipeline) and renders them without knowing which experiment wrote them, so new
experiments slot in by writing one more section. Every file it reads is an input the report stage
declares: the sections and metrics copies under ``data/bounds/``, the CSVs under ``plots/``, the
verified files under ``data/raw/`` and ``params.yaml``. Stage run times come from the sections
(each records its train stage's time from the train manifest), not from ``data/timing/``.
The HTML carries its CSS and every figure inline (base64 PNG) and references no external URL,
so it can be mailed or archived as one file. ``metrics/summary.json`` holds the headline row of
each audit as numbers only, keyed by audit name, for ``dvc metrics diff``.

HTML is assembled by hand with :func:`html.escape` on every interpolated value: the page is a
handful of tables and images, for which a template engine would be one more dependency.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import importlib.metadata
import logging
import math
import platform
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpaudit.bounds.accountants import ACCOUNTANTS
from dpaudit.config import from_mapping, require, section
from dpaudit.data.download import file_facts
from dpaudit.io import atomic_path, read_json, write_json
from dpaudit.layout import DOWNLOAD_MANIFEST_NAME as MANIFEST_NAME
from dpaudit.report.figures import FigureError, region_of_privacy_png, render_figure
from dpaudit.report.spec import ReportSection, SummaryRow, TableSpec

logger = logging.getLogger(__name__)

STAGE_ORDER = ("download", "prepare", "sensitivity", "train", "losses", "attack", "bounds", "report")
PACKAGES = (
    "dpaudit",
    "tensorflow",
    "tensorflow-privacy",
    "dp-accounting",
    "dvc",
    "numpy",
    "scikit-learn",
    "xgboost",
    "scipy",
    "pandas",
    "matplotlib",
)

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px;
       padding: 0 1rem; color: #1d2330; line-height: 1.45; }
h1 { border-bottom: 3px solid #3a6ea5; padding-bottom: .3rem; }
h2 { margin-top: 2.5rem; border-bottom: 1px solid #c8d0dc; padding-bottom: .2rem; }
h3 { margin-top: 1.6rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .88rem; }
th, td { border: 1px solid #c8d0dc; padding: .25rem .55rem; text-align: right; vertical-align: top; }
th { background: #eef2f7; }
td.text, th.text { text-align: left; }
tbody tr:nth-child(even) { background: #f8fafc; }
figure { margin: 1rem 0 1.8rem; }
figure img { max-width: 100%; height: auto; border: 1px solid #e1e6ee; }
figcaption, .caption { color: #4a5568; font-size: .88rem; }
pre { background: #f4f6f9; padding: .8rem; overflow-x: auto; font-size: .8rem; }
nav ul { columns: 2; }
.muted { color: #6b7280; }
details { margin: .5rem 0 1rem; }
"""


@dataclass(frozen=True)
class ReportConfig:
    """The ``report`` section of ``params.yaml``: the report's title."""

    title: str = "dpaudit audit report"

    def __post_init__(self) -> None:
        require(bool(self.title.strip()), "report.title", self.title, "must be a non-empty string")


def config_from_params(params: Mapping[str, Any]) -> ReportConfig:
    """Validate the ``report`` section of ``params.yaml`` (unknown keys and bad values name the key)."""
    return from_mapping(ReportConfig, section(params, "report"), "report")


@dataclass(frozen=True)
class LoadedSection:
    """A section and the audit name (its ``data/bounds/<audit>/`` directory) it was read from."""

    audit: str
    path: Path
    section: ReportSection


# ----------------------------------------------------------------------------------------------
# Reading inputs


def find_sections(root: Path, audits: Sequence[str] | None = None) -> list[LoadedSection]:
    """Load ``data/bounds/<audit>/section.json`` of each of ``audits`` (sorted by name).

    ``audits`` is the list of audits to render (the pipeline passes the ``audits`` of params.yaml);
    a listed audit without a section is an error naming the file. ``None`` loads every section found
    (for use outside the pipeline only: stale sections of removed audits would be included).
    """
    bounds = root / "data" / "bounds"
    if audits is None:
        paths = sorted(bounds.glob("*/section.json"))
    else:
        paths = [bounds / name / "section.json" for name in sorted(audits)]
    sections = []
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: the report section of audit '{path.parent.name}' (run its bounds stage)"
            )
        try:
            section = ReportSection.load(path)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path} is not a valid report section ({type(exc).__name__}: {exc})") from exc
        sections.append(LoadedSection(audit=path.parent.name, path=path, section=section))
    return sections


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def summary_metrics(sections: Sequence[LoadedSection]) -> dict[str, dict[str, Any]]:
    """Headline numbers per audit, numbers only (None and non-finite values are left out).

    Per audit: the accountants' ε, the best valid ε lower bound, the scores the section declares
    (:attr:`ReportSection.scores`, e.g. ρβ and ρα, or Epsilon*) and the utility.
    """
    out: dict[str, dict[str, Any]] = {}
    for loaded in sections:
        row = loaded.section.headline
        entry: dict[str, Any] = {}
        upper = {name: v for name, value in row.epsilon_upper.items() if (v := _finite(value)) is not None}
        if upper:
            entry["epsilon_upper"] = upper
        lower = _finite(row.epsilon_lower)
        if lower is not None:
            entry["epsilon_lower"] = lower
        for key in loaded.section.scores:
            value = _finite(row.scores.get(key))
            if value is not None:
                entry[key] = value
        utility = _finite(row.utility)
        if utility is not None:
            entry["utility"] = {row.utility_name or "utility": utility}
        out[loaded.audit] = entry
    return out


def _registry() -> Mapping[str, Any]:
    """``dpaudit.data.registry.DATASETS`` when that module is importable, else an empty mapping."""
    try:
        from dpaudit.data.registry import DATASETS
    except ImportError as exc:
        logger.warning("dataset registry unavailable, digests are listed unchecked: %s", exc)
        return {}
    return DATASETS


def _registry_check(facts: Mapping[str, str | int], expected: Mapping[str, str | int] | None) -> str:
    if not expected:
        return "not in registry"
    wrong = [
        f"{key} {facts.get(key)} ≠ {value}" for key, value in expected.items() if facts.get(key) != value
    ]
    if wrong:
        return "MISMATCH: " + "; ".join(wrong)
    return "matches registry (" + ", ".join(expected) + ")"


@dataclass(frozen=True)
class DatasetFile:
    """One file under ``data/raw/<dataset>/`` with its digest and its check against the registry."""

    dataset: str
    path: str
    size: int
    sha256: str
    check: str
    source: str


def dataset_files(root: Path) -> list[DatasetFile]:
    """Every file under ``data/raw/<dataset>/`` but the download manifest, checked against the registry."""
    raw = root / "data" / "raw"
    if not raw.is_dir():
        return []
    registry = _registry()
    rows = []
    for path in sorted(p for p in raw.rglob("*") if p.is_file() and not p.name.startswith(".")):
        dataset = path.relative_to(raw).parts[0]
        if path.name == MANIFEST_NAME:
            continue
        spec = registry.get(dataset)
        file_spec = next((f for f in getattr(spec, "files", ()) if f.name == path.name), None)
        facts = file_facts(path)
        expected = file_spec.expected() if file_spec is not None else None
        source = ""
        if file_spec is not None:
            source = file_spec.urls[0] if file_spec.urls else file_spec.origin
        rows.append(
            DatasetFile(
                dataset,
                str(path.relative_to(root)),
                int(facts["size"]),
                str(facts["sha256"]),
                _registry_check(facts, expected),
                source,
            )
        )
    return rows


def dataset_notes(root: Path) -> list[tuple[str, str, str, str]]:
    """(dataset, licence, homepage, note) for every ``data/raw/<dataset>/`` directory."""
    raw = root / "data" / "raw"
    if not raw.is_dir():
        return []
    registry = _registry()
    rows = []
    for directory in sorted(p for p in raw.iterdir() if p.is_dir()):
        spec = registry.get(directory.name)
        note = ""
        manifest = directory / MANIFEST_NAME
        if manifest.is_file():
            try:
                note = str(read_json(manifest).get("note", ""))
            except (ValueError, AttributeError) as exc:
                logger.warning("unreadable manifest %s: %s", manifest, exc)
        rows.append(
            (directory.name, getattr(spec, "license", "not in registry"), getattr(spec, "homepage", ""), note)
        )
    return rows


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str]:
    """Installed version of each distribution (``"not installed"`` when absent), plus Python's."""
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit(root: Path) -> str | None:
    """``HEAD``'s commit id (with ``+ uncommitted changes`` when the tree is dirty), or None outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=20
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = head.stdout.strip()
    return commit + (" + uncommitted changes" if status.returncode == 0 and status.stdout.strip() else "")


def stage_timings(sections: Sequence[LoadedSection]) -> list[tuple[str, float]]:
    """(stage, seconds) that the sections record (e.g. ``train@adult-membership`` from the train manifest).

    Only times that are facts of the rendered results are shown: they travel with the outputs the
    report stage declares as inputs. The per-stage log under ``data/timing/`` is not read.
    """
    timings: dict[str, float] = {}
    for loaded in sections:
        for stage, seconds in loaded.section.timings.items():
            timings[f"{stage}@{loaded.audit}"] = float(seconds)

    def order(stage: str) -> tuple[int, str]:
        family = stage.split("@", 1)[0]
        return (STAGE_ORDER.index(family) if family in STAGE_ORDER else len(STAGE_ORDER), stage)

    return sorted(timings.items(), key=lambda item: order(item[0]))


def audit_metrics(root: Path, audit: str) -> list[tuple[str, float]]:
    """Flattened metrics of an audit as (slash-joined key, number) pairs; empty when absent.

    Read from the bounds stage's copy ``data/bounds/<audit>/metrics.json`` (a declared input of the
    report stage; ``metrics/<audit>.json`` holds the same numbers for ``dvc metrics``).
    """
    path = root / "data" / "bounds" / audit / "metrics.json"
    if not path.is_file():
        return []
    try:
        raw = read_json(path)
    except ValueError as exc:
        logger.warning("skipping %s: %s", path, exc)
        return []
    flat: list[tuple[str, float]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                walk(f"{prefix}/{key}" if prefix else str(key), inner)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat.append((prefix, float(value)))

    walk("", raw)
    return flat


# ----------------------------------------------------------------------------------------------
# HTML pieces


def format_value(value: Any) -> str:
    """A table cell as escaped text: numbers to 4 significant digits, None as an em dash, inf as ∞."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        return f"{value:.4g}"
    return html.escape(str(value))


def _cell(value: Any, tag: str = "td") -> str:
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    css = "" if numeric or value is None else ' class="text"'
    return f"<{tag}{css}>{format_value(value)}</{tag}>"


def html_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    table_id: str | None = None,
    row_attrs: Sequence[str] | None = None,
) -> str:
    """An HTML table; ``row_attrs`` adds raw (already escaped) attributes per body row."""
    id_attr = f' id="{html.escape(table_id)}"' if table_id else ""
    head = "".join(f'<th class="text">{html.escape(str(c))}</th>' for c in columns)
    body = []
    for i, row in enumerate(rows):
        attrs = f" {row_attrs[i]}" if row_attrs else ""
        body.append(f"<tr{attrs}>" + "".join(_cell(v) for v in row) + "</tr>")
    return f"<table{id_attr}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _accountants(rows: Iterable[SummaryRow]) -> list[str]:
    names = {name for row in rows for name in row.epsilon_upper}
    return [a for a in ACCOUNTANTS if a in names] + sorted(names - set(ACCOUNTANTS))


def _scores(sections: Iterable[ReportSection]) -> dict[str, str]:
    """The declared headline scores of ``sections``, key → label, in order of first appearance."""
    scores: dict[str, str] = {}
    for section_ in sections:
        for key, label in section_.scores.items():
            scores.setdefault(key, label)
    return scores


def _summary_columns(accountants: Sequence[str], scores: Mapping[str, str]) -> list[str]:
    return [
        *(f"ε upper ({a})" for a in accountants),
        "ε lower (valid, joint confidence)",
        "estimator",
        "assumes",
        *scores.values(),
        "utility",
    ]


def _summary_cells(row: SummaryRow, accountants: Sequence[str], scores: Mapping[str, str]) -> list[Any]:
    utility = (
        None if row.utility is None else f"{row.utility_name or 'utility'} {format_value(float(row.utility))}"
    )
    return [
        *(row.epsilon_upper.get(a) for a in accountants),
        row.epsilon_lower,
        row.epsilon_lower_estimator,
        row.epsilon_lower_assumes if row.epsilon_lower is not None else None,
        *(row.scores.get(key) for key in scores),
        utility,
    ]


def _anchor(audit: str) -> str:
    return "audit-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in audit)


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def _figure_html(png: bytes, title: str, caption: str, figure_id: str) -> str:
    text = f"<b>{html.escape(title)}</b>" + (f". {html.escape(caption)}" if caption else "")
    cap = f"<figcaption>{text}</figcaption>"
    return f'<figure id="{html.escape(figure_id)}">{_img(png, title)}{cap}</figure>'


def _table_html(table: TableSpec, audit: str) -> str:
    for i, row in enumerate(table.rows):
        if len(row) != len(table.columns):
            raise ValueError(
                f"section {audit}: table {table.id!r} row {i} has {len(row)} cells "
                f"for {len(table.columns)} columns"
            )
    caption = f'<p class="caption">{html.escape(table.caption)}</p>' if table.caption else ""
    return (
        f"<h4>{html.escape(table.title)}</h4>"
        + html_table(table.columns, table.rows, table_id=f"{_anchor(audit)}-{table.id}")
        + caption
    )


def _section_html(loaded: LoadedSection, root: Path) -> str:
    section = loaded.section
    audit = loaded.audit
    parts = [
        f'<section class="audit" id="{_anchor(audit)}" data-audit="{html.escape(audit)}">',
        f'<h2>{html.escape(section.title)} <span class="muted">({html.escape(audit)})</span></h2>',
        f"<p>{html.escape(section.description)}</p>",
    ]
    rows = section.rows or [section.headline]
    accountants = _accountants(rows)
    parts.append("<h3>Settings</h3>")
    scores = _scores([section])
    parts.append(
        html_table(
            ["setting", *_summary_columns(accountants, scores)],
            [[r.setting, *_summary_cells(r, accountants, scores)] for r in rows],
        )
    )
    if section.tables:
        parts.append("<h3>Tables</h3>")
        parts.extend(_table_html(t, audit) for t in section.tables)
    if section.figures:
        parts.append("<h3>Figures</h3>")
    for spec in section.figures:
        try:
            png = render_figure(spec, root)
        except FigureError as exc:
            raise FigureError(f"section {loaded.path}: {exc}") from exc
        parts.append(_figure_html(png, spec.title, spec.caption, f"{_anchor(audit)}-{spec.id}"))
    metrics = audit_metrics(root, audit)
    if metrics:
        parts.append(
            f"<details><summary>All numbers of results/{html.escape(audit)}.json "
            f"({len(metrics)} numbers)</summary>"
        )
        parts.append(html_table(["metric", "value"], metrics))
        parts.append("</details>")
    parts.append("</section>")
    return "\n".join(parts)


def _summary_html(sections: Sequence[LoadedSection]) -> str:
    headlines = [s.section.headline for s in sections]
    accountants = _accountants(headlines)
    scores = _scores(s.section for s in sections)
    columns = ["dataset", "experiment", "setting", *_summary_columns(accountants, scores)]
    rows = [
        [
            s.section.dataset,
            s.section.experiment,
            s.section.headline.setting,
            *_summary_cells(s.section.headline, accountants, scores),
        ]
        for s in sections
    ]
    attrs = [f'data-audit="{html.escape(s.audit)}"' for s in sections]
    return html_table(columns, rows, table_id="summary", row_attrs=attrs)


def _provenance_html(root: Path, sections: Sequence[LoadedSection]) -> str:
    parts = ['<section id="provenance"><h2>Provenance</h2>']
    commit = git_commit(root)
    parts.append(
        f"<p>Git commit: <code>{html.escape(commit) if commit else 'not a git repository'}</code></p>"
    )
    notes = dataset_notes(root)
    files = dataset_files(root)
    parts.append("<h3>Datasets</h3>")
    if notes:
        parts.append(html_table(["dataset", "licence", "homepage", "note"], notes))
        parts.append(
            html_table(
                ["dataset", "file", "bytes", "sha256", "check", "source"],
                [[f.dataset, f.path, f.size, f.sha256, f.check, f.source] for f in files],
            )
        )
    else:
        parts.append('<p class="muted">No downloaded datasets under data/raw/.</p>')
    params_path = root / "params.yaml"
    parts.append("<h3>Parameters (params.yaml)</h3>")
    if params_path.is_file():
        parts.append(f"<pre>{html.escape(params_path.read_text())}</pre>")
    else:
        parts.append('<p class="muted">No params.yaml found.</p>')
    parts.append("<h3>Package versions</h3>")
    parts.append(html_table(["package", "version"], list(package_versions().items())))
    timings = stage_timings(sections)
    parts.append("<h3>Run time per stage</h3>")
    if timings:
        total = sum(seconds for _, seconds in timings)
        parts.append(html_table(["stage", "seconds"], [*timings, ("total", total)]))
    else:
        parts.append('<p class="muted">No stage timings recorded in the sections.</p>')
    parts.append("</section>")
    return "\n".join(parts)


def render_html(root: Path, sections: Sequence[LoadedSection], title: str) -> str:
    """The whole report page as a string (see :func:`build_report`)."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    toc = "".join(
        f'<li><a href="#{_anchor(s.audit)}">{html.escape(s.section.title)} ({html.escape(s.audit)})</a></li>'
        for s in sections
    )
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="muted">Generated {now} from {len(sections)} audit section(s).</p>',
        f'<nav><ul>{toc}<li><a href="#provenance">Provenance</a></li></ul></nav>',
        '<section id="overview"><h2>Summary</h2>',
        "<p>One row per audit (dataset × experiment), its headline setting. ε upper bounds come from the "
        "privacy accountants; the ε lower bound is a statistically valid bound an attack proved, at the "
        "joint confidence its estimator column states (both error-rate limits and every threshold tried "
        "inside that level), with what the estimator assumes about the mechanism (none for the threshold "
        "sweeps). Estimates (ε′, Epsilon*, the naive sweep) are never shown as lower bounds; "
        "ρβ is the bound on the adversary's posterior belief and ρα on its expected membership advantage "
        "(Bernau et al.); Epsilon* is the empirical privacy loss of the trained model (Negoescu et al.).</p>",
    ]
    if sections:
        body.append(_summary_html(sections))
        region = region_of_privacy_png(
            [(s.audit, r) for s in sections for r in (s.section.rows or [s.section.headline])]
        )
        if region is not None:
            body.append(
                _figure_html(
                    region,
                    "Region of privacy",
                    "For every setting of every audit: the true ε lies "
                    "between the valid attack lower bound (at its joint confidence; its estimator and "
                    "assumption are in the summary table) and the tightest accountant upper "
                    "bound (Erlingsson et al. §5.3). Epsilon* is drawn as a separate marker: an "
                    "estimate for the trained model, not a bound.",
                    "region-of-privacy",
                )
            )
    else:
        body.append('<p class="muted">No audits to report (params.yaml lists none).</p>')
    body.append("</section>")
    body.extend(_section_html(s, root) for s in sections)
    body.append(_provenance_html(root, sections))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def build_report(
    root: Path, out_html: Path, summary_path: Path, title: str, audits: Sequence[str] | None = None
) -> None:
    """Render ``out_html`` (one self-contained page) and ``summary_path`` from the sections of ``audits``.

    Reads ``data/bounds/<audit>/section.json`` and ``metrics.json`` of each audit (all found when
    ``audits`` is None), the CSVs their figures name, ``params.yaml`` and ``data/raw/``; absent
    optional inputs are noted in the page rather than failing. Both outputs are written atomically.
    """
    root = Path(root)
    sections = find_sections(root, audits)
    if not sections:
        logger.warning("no report sections under %s", root / "data" / "bounds")
    logger.info("rendering %d section(s): %s", len(sections), ", ".join(s.audit for s in sections))
    page = render_html(root, sections, title)
    with atomic_path(out_html) as tmp:
        tmp.write_text(page, encoding="utf-8")
    write_json(summary_path, summary_metrics(sections))
    logger.info("wrote %s (%.1f kB) and %s", out_html, len(page) / 1024, summary_path)
