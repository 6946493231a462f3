"""The report's text, written twice: HTML (one self-contained page) and Markdown.

:class:`Markup` collects both forms side by side: headings, paragraphs, banners, tables and
figures. Every piece of text is escaped for its form (HTML entities; Markdown's special
characters as well), figures are embedded in the HTML as base64 PNGs and linked from the
Markdown as files under ``figures/``. The CSS is inline: no scripts, no network.
"""

from __future__ import annotations

import base64
import html
import re

import numpy as np
import pandas as pd

from bayes_dualeval.report.plots import to_png

#: Folder of the Markdown report's figures, beside it.
FIGURES_DIR = "figures"

CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
margin:0;color:#1d232b;background:#eef1f4;line-height:1.45}
main{max-width:1280px;margin:0 auto;padding:20px 36px 64px;background:#fff;min-height:100vh}
h1{font-size:1.7em;margin:8px 0 4px}
h2{font-size:1.3em;border-bottom:2px solid #e1e6ec;padding-bottom:4px;margin:2.2em 0 .6em}
p{margin:.5em 0;max-width:60em}
.meta{color:#56606b;font-size:.92em;margin:0}
nav.toc{font-size:.92em;margin:10px 0 4px;padding:8px 0;border-top:1px solid #e1e6ec;
border-bottom:1px solid #e1e6ec}
nav.toc{display:flex;flex-wrap:wrap;gap:4px 18px}
nav.toc a{color:#2b5c8f;text-decoration:none;white-space:nowrap}
.banner{border-radius:6px;padding:10px 16px;margin:14px 0}
.banner strong{display:block;margin-bottom:2px}
.banner ul{margin:4px 0 0 0;padding-left:1.3em}
.banner-error{background:#fdecea;border:2px solid #d9534f;color:#6f1a14}
.banner-warn{background:#fff5dc;border:1px solid #e0b450;color:#5a4510}
.banner-info{background:#e9f1fa;border:1px solid #93b6dc;color:#1d3c5c}
.note{color:#56606b;font-style:italic}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.84em;margin:8px 0 4px}
th,td{padding:3px 7px;border-bottom:1px solid #e6e9ed;text-align:right;vertical-align:top;
font-variant-numeric:tabular-nums}
th{background:#f1f4f7;position:sticky;top:0;font-weight:600}
th,td{white-space:nowrap}
th.text,td.text{text-align:left}
td.name{text-align:left;white-space:normal;min-width:12em;max-width:34em;
overflow-wrap:anywhere;font-weight:500}
td.wrap{white-space:normal;text-align:left;min-width:20em}
tr.tier-b td{background:#f5f7fa}
tr.tier-start td{border-top:2px solid #8d9aa8}
td.tie{color:#8a6d00;font-weight:700;text-align:center}
td.bad{color:#b3261e;font-weight:600}
td.good{color:#1e6b37}
figure{margin:14px 0 18px}
img{max-width:100%;height:auto;border:1px solid #edf0f3}
figcaption{font-size:.88em;color:#56606b;max-width:60em}
code{font-size:.92em;background:#f1f4f7;padding:0 3px;border-radius:3px}
""".strip()


def md_escape(text) -> str:
    """Text for Markdown: HTML-escaped, with Markdown's special characters escaped."""
    return re.sub(r"([\\`*_\[\]|#~])", r"\\\1", html.escape(str(text), quote=False))


def num(x, spec: str = ".2f") -> str:
    """``x`` formatted with ``spec``; an en dash for None, NaN and infinities."""
    try:
        if x is None or not np.isfinite(float(x)):
            return "\u2013"
    except (TypeError, ValueError):
        return str(x)
    return format(float(x), spec)


def pct(x) -> str:
    """A share as a whole percentage; an en dash for None."""
    return "\u2013" if x is None else f"{100 * float(x):.0f}%"


class Markup:
    """The HTML and Markdown reports, built side by side.

    Attributes
    ----------
    html, md : list of str
        The parts of each document, in order.
    figures : dict of str to bytes
        Figure name to PNG bytes.
    """

    def __init__(self):
        self.html: list[str] = []
        self.md: list[str] = []
        self.figures: dict[str, bytes] = {}

    def mark(self) -> tuple:
        """A position to :meth:`rewind` to."""
        return len(self.html), len(self.md), set(self.figures)

    def rewind(self, mark: tuple) -> None:
        """Drop everything added after ``mark`` (from :meth:`mark`)."""
        n_html, n_md, figures = mark
        del self.html[n_html:], self.md[n_md:]
        for name in set(self.figures) - figures:
            del self.figures[name]

    def title(self, title: str, meta: str, toc: dict) -> None:
        """The page header: title, a line of facts and links to the sections (anchor: title)."""
        links = "".join(f'<a href="#{a}">{html.escape(t)}</a>' for a, t in toc.items())
        self.html.append(
            f"<header><h1>{html.escape(title)}</h1>"
            f'<p class="meta">{html.escape(meta)}</p><nav class="toc">{links}</nav></header>'
        )
        self.md.append(f"# {md_escape(title)}\n")
        self.md.append(md_escape(meta) + "\n")

    def heading(self, anchor: str, title: str) -> None:
        """A section heading with an anchor for the table of contents."""
        self.html.append(f'<h2 id="{anchor}">{html.escape(title)}</h2>')
        self.md.append(f"## {title}\n")

    def para(self, text: str, *, cls: str = "") -> None:
        """A paragraph of plain text (escaped); class ``note`` is set in italics."""
        attr = f' class="{cls}"' if cls else ""
        self.html.append(f"<p{attr}>{html.escape(text)}</p>")
        self.md.append(("_" + md_escape(text) + "_" if cls == "note" else md_escape(text)) + "\n")

    def note(self, text: str) -> None:
        """A paragraph in the muted style of remarks (why a panel is skipped, caveats)."""
        self.para(text, cls="note")

    def banner(self, kind: str, title: str, lines=()) -> None:
        """A coloured box (``error``, ``warn`` or ``info``) with a title and a list."""
        items = "".join(f"<li>{html.escape(str(t))}</li>" for t in lines)
        self.html.append(
            f'<div class="banner banner-{kind}" role="alert"><strong>{html.escape(title)}'
            f"</strong>{f'<ul>{items}</ul>' if items else ''}</div>"
        )
        icon = {"error": "\u26d4", "warn": "\u26a0\ufe0f", "info": "\u2139\ufe0f"}[kind]
        self.md.append(f"> {icon} **{md_escape(title)}**")
        self.md.extend(f"> - {md_escape(t)}" for t in lines)
        self.md.append("")

    def table(
        self,
        frame: pd.DataFrame,
        *,
        text: tuple = (),
        names: tuple = (),
        row_class=None,
        cell_class=None,
        header: bool = True,
    ) -> None:
        """A table of strings; ``text`` columns align left, ``names`` may wrap anywhere.

        ``row_class(k)`` and ``cell_class(k, column)`` give extra CSS classes of row ``k``
        and its cells.
        """
        cols = list(frame.columns)

        def cls(c):
            return "name" if c in names else "text" if c in text else ""

        head = "".join(
            f'<th class="{"text" if c in text or c in names else ""}">{html.escape(str(c))}</th>'
            for c in cols
        )
        body = []
        for k, row in enumerate(frame.itertuples(index=False)):
            rc = row_class(k) if row_class else ""
            cells = []
            for c, v in zip(cols, row, strict=True):
                extra = cell_class(k, c) if cell_class else ""
                classes = " ".join(x for x in (cls(c), extra) if x)
                cells.append(f'<td class="{classes}">{html.escape(str(v))}</td>')
            body.append(f'<tr class="{rc}">{"".join(cells)}</tr>')
        thead = f"<thead><tr>{head}</tr></thead>" if header else ""
        self.html.append(
            f'<div class="scroll"><table>{thead}<tbody>{"".join(body)}</tbody></table></div>'
        )
        self.md.append("| " + " | ".join(md_escape(c) for c in cols) + " |")
        self.md.append(
            "|" + "|".join(":--" if c in text or c in names else "--:" for c in cols) + "|"
        )
        for row in frame.itertuples(index=False):
            self.md.append("| " + " | ".join(md_escape(v) for v in row) + " |")
        self.md.append("")

    def facts(self, facts: dict, *, bad: str | None = None) -> None:
        """A two-column table of ``name: value`` lines; the line named ``bad`` in red."""
        frame = pd.DataFrame({"": list(facts), " ": [str(v) for v in facts.values()]})

        def cell_class(k, col):
            if col != " ":
                return ""
            return "wrap bad" if bad and frame[""].iloc[k] == bad else "wrap"

        self.table(frame, text=("", " "), cell_class=cell_class, header=False)

    def figure(self, name: str, fig, caption: str) -> None:
        """A figure: embedded in the HTML, linked as ``figures/<name>.png`` in Markdown."""
        png = to_png(fig)
        self.figures[name] = png
        data = base64.b64encode(png).decode("ascii")
        self.html.append(
            f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
        self.md.append(f"![{md_escape(caption)}]({FIGURES_DIR}/{name}.png)\n")
        self.md.append(f"_{md_escape(caption)}_\n")

    def page(self, title: str) -> str:
        """The HTML document: head with the inline CSS, and the body parts."""
        body = "\n".join(self.html)
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n"
            f"<body><main>\n{body}\n</main></body></html>\n"
        )

    def markdown(self) -> str:
        """The Markdown document."""
        return "\n".join(self.md).rstrip() + "\n"
