"""HTML building blocks of the report: the style sheet, escaped cells, tables and inline figures.

HTML is assembled by hand with :func:`html.escape` on every interpolated value: the page is a
handful of tables and images, for which a template engine would be one more dependency. A cell is
either a plain value (number, string, None), escaped and formatted by :func:`format_value`, or a
:class:`Markup` fragment that the caller has already escaped (used for the summary's headline
cells, which carry a tag and a tooltip).
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

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
.wide { display: block; max-width: 100%; overflow-x: auto; }
table.summary { width: 100%; table-layout: fixed; }
table.summary td, table.summary th { overflow-wrap: anywhere; }
.tag { display: block; color: #4a5568; font-size: .78rem; }
.over { color: #b42318; font-weight: 600; cursor: help; }
.tag[title] { cursor: help; text-decoration: underline dotted #9aa5b5; }
figure { margin: 1rem 0 1.8rem; }
figure img { max-width: 100%; height: auto; border: 1px solid #e1e6ee; }
figcaption, .caption { color: #4a5568; font-size: .88rem; }
pre { background: #f4f6f9; padding: .8rem; overflow-x: auto; font-size: .8rem; white-space: pre-wrap; }
code { overflow-wrap: anywhere; }
nav ul { columns: 2; }
.muted { color: #6b7280; }
details { margin: .5rem 0 1rem; }
"""


@dataclass(frozen=True)
class Markup:
    """An HTML fragment already escaped by its maker; ``numeric`` right-aligns its cell."""

    html: str
    numeric: bool = True


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


def tag(text: str, title: str | None = None) -> str:
    """A small second line under a cell's value; ``title`` becomes its tooltip (the long text)."""
    tip = f' title="{html.escape(title)}"' if title and title != text else ""
    return f'<span class="tag"{tip}>{html.escape(text)}</span>'


def _cell(value: Any, tag_name: str = "td") -> str:
    if isinstance(value, Markup):
        css = "" if value.numeric else ' class="text"'
        return f"<{tag_name}{css}>{value.html}</{tag_name}>"
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    css = "" if numeric or value is None else ' class="text"'
    return f"<{tag_name}{css}>{format_value(value)}</{tag_name}>"


def html_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    table_id: str | None = None,
    row_attrs: Sequence[str] | None = None,
    css_class: str | None = None,
) -> str:
    """An HTML table; ``row_attrs`` adds raw (already escaped) attributes per body row.

    A table without ``css_class`` sits in a box that scrolls sideways on its own when it is wider
    than the page, so one wide table never widens the whole page.
    """
    id_attr = f' id="{html.escape(table_id)}"' if table_id else ""
    class_attr = f' class="{html.escape(css_class)}"' if css_class else ""
    head = "".join(f'<th class="text">{html.escape(str(c))}</th>' for c in columns)
    body = []
    for i, row in enumerate(rows):
        attrs = f" {row_attrs[i]}" if row_attrs else ""
        body.append(f"<tr{attrs}>" + "".join(_cell(v) for v in row) + "</tr>")
    table = (
        f"<table{id_attr}{class_attr}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )
    return table if css_class else f'<div class="wide">{table}</div>'


def anchor(audit: str) -> str:
    """The HTML id of an audit's section."""
    return "audit-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in audit)


def img(png: bytes, alt: str) -> str:
    """An inline (base64) PNG image."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def figure_html(png: bytes, title: str, caption: str, figure_id: str) -> str:
    """A figure with its bold title and caption below."""
    text = f"<b>{html.escape(title)}</b>" + (f". {html.escape(caption)}" if caption else "")
    cap = f"<figcaption>{text}</figcaption>"
    return f'<figure id="{html.escape(figure_id)}">{img(png, title)}{cap}</figure>'
