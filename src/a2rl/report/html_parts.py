"""The pieces every page of the HTML report is made of: the page and its style, escaped and
formatted values, tables, diffs, and the ``a2rl.analysis.view`` texts (spans, lines, tables)
drawn as HTML."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from a2rl.analysis.leaderboard import _plain
from a2rl.analysis.view import IntegrityView, Line, Span, Table, route_text

MAX_DIFF_CHARS = 200_000
CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1.5em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; font-size: 1.25em;
  border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f5f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafbfc; }
.muted { color: #666; font-size: 0.9em; } .flag { color: #b00020; font-weight: bold; }
.ok { color: #1b7f3b; } code { background: #f3f5f7; padding: 0 3px; border-radius: 3px; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; font-size: 0.82em;
      border: 1px solid #e1e4e8; border-radius: 4px; }
pre.diff .add { color: #1b7f3b; } pre.diff .del { color: #b00020; }
pre.diff .hunk { color: #6f42c1; } pre.diff .file { font-weight: bold; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
td a { white-space: nowrap; } nav a { margin-right: 1em; }
.wide { overflow-x: auto; max-width: 100%; } .wide > table { margin: 0; }
.wide { margin: 0.6em 0; }
details { margin: 0.4em 0; } summary { cursor: pointer; }
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def fmt(value: Any, digits: int = 2, signed: bool = False) -> str:
    value = _plain(value)
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return esc(value)
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def page(title: str, body: str, depth: int = 0) -> str:
    home = "../" * depth + "index.html"
    nav = f'<nav><a href="{home}">Leaderboard</a></nav>' if depth else ""
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{nav}\n"
            f"{body}\n</body>\n</html>\n")


def table(header: list[str], rows: list[list[str]], numeric: Iterable[int] = (),
          cls: str = "") -> str:
    """An HTML table; cells are HTML already (escape text before). It scrolls inside a box of
    the page's width when it is wider (a leaderboard's many columns), so the page does not."""
    numeric = set(numeric)
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
        for i, c in enumerate(row)) + "</tr>\n" for row in rows)
    attr = f' class="{cls}"' if cls else ""
    return (f'<div class="wide"><table{attr}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}'
            "</tbody>\n</table></div>")


def diff_html(text: str) -> str:
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + "\n... (diff cut at 200,000 characters)\n"
    out = []
    for line in text.splitlines():
        cls = ("file" if line.startswith(("diff --git", "+++", "---", "index ")) else
               "add" if line.startswith("+") else "del" if line.startswith("-") else
               "hunk" if line.startswith("@@") else "")
        out.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
    return '<pre class="diff">' + "\n".join(out) + "</pre>"


def route_html(methods: list[str], techniques: list[str]) -> str:
    return esc(route_text(methods, techniques))


def short_commit(commit: str | None) -> str:
    return f"<code>{esc(commit[:10])}</code>" if commit else "–"


def span_html(span: Span) -> str:
    text = esc(span.text)
    if span.mark == "code":
        return f"<code>{text}</code>"
    return f'<span class="{span.mark}">{text}</span>' if span.mark else text


def line_html(spans: Line) -> str:
    return "".join(span_html(s) for s in spans)


def view_table(t: Table) -> str:
    """A view's table, every row and the whole of every cell."""
    return table(list(t.header), [[span_html(v) if isinstance(v, Span) else esc(v) for v in row]
                                  for row in t.rows], t.numeric)


def integrity_badge(view: IntegrityView) -> str:
    """The verdict in a few words, for the runs table of the index."""
    parts = []
    if view.flagged:
        parts.append(f'<span class="flag">contaminated ({view.contaminated_items})</span>')
    elif view.checked:
        parts.append('<span class="ok">clean</span>')
    else:
        parts.append('<span class="muted">not checked</span>')
    if view.tamper_count:
        parts.append(f'<span class="flag">{view.tamper_count} tamper</span>')
    return ", ".join(parts)
