"""MkDocs hooks of the documentation site (mkdocs.yml).

- The CHANGELOG and CONTRIBUTING of the repository's top folder become the pages
  ``changelog.md`` and ``contributing.md`` (whose files in docs/ only hold their place), their
  links rewritten for the site: ``docs/X`` to ``X``, each other to its page, anything else in the
  repository to its address under ``repo_url``.
- A name in a table cell (``nbstream_prequential_accuracy{window}``, ``--max-message-bytes``) may
  break before a brace and, but in a row's first cell, after an underscore, a dot, a comma or a
  dash within a word, rather than inside a word (docs/stylesheets/extra.css keeps it from
  breaking elsewhere).
- Each table cell is labelled with its column's header (``data-label``), which a phone shows above
  the cell when docs/stylesheets/extra.css stacks a table's rows: three columns of sentences do
  not fit side by side on a phone.
- The search index is also written as ``search/search_index.js``, a script, which the theme loads
  instead of fetching the JSON when the site is opened from the file system (``file://``, where
  nothing can be fetched); ``docs/javascripts/file-worker.js`` runs the search there.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

FROM_TOP = {"changelog.md": "CHANGELOG.md", "contributing.md": "CONTRIBUTING.md"}
SITE_PAGES = {"CHANGELOG.md": "changelog.md", "CONTRIBUTING.md": "contributing.md", "README.md": "index.md"}
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
CELL = re.compile(r"(<td[^>]*>)(.*?)(</td>)", re.DOTALL)
CODE = re.compile(r"<code>([^<]*)</code>")
TABLE = re.compile(r"<table>(.*?)</table>", re.DOTALL)
HEADER = re.compile(r"<th[^>]*>(.*?)</th>", re.DOTALL)
ROW = re.compile(r"<tr>.*?</tr>", re.DOTALL)
TAG = re.compile(r"<[^>]+>")


def site_links(text: str, repo_url: str) -> str:
    """The links of a Markdown file of the repository's top folder, as a page of the site sees them.

    >>> site_links("[a](docs/a.md#x) [b](CHANGELOG.md) [c](scripts/x.py) [d](https://e/) [f](#g)", "https://r")
    '[a](a.md#x) [b](changelog.md) [c](https://r/blob/main/scripts/x.py) [d](https://e/) [f](#g)'
    """

    def rewritten(match: re.Match[str]) -> str:
        target = match["target"]
        path, _, anchor = target.partition("#")
        if not path or re.match(r"[a-z]+:", path):
            return match[0]
        if path.startswith("docs/"):
            site = path.removeprefix("docs/")
        elif path in SITE_PAGES:
            site = SITE_PAGES[path]
        else:
            return f"]({repo_url.rstrip('/')}/blob/main/{target})"
        return f"]({site}{'#' + anchor if anchor else ''})"

    return LINK.sub(rewritten, text)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    source = FROM_TOP.get(page.file.src_uri)
    if source is None:
        return markdown
    text = (Path(config.config_file_path).parent / source).read_text(encoding="utf-8")
    return site_links(text, config.repo_url or "")


def breakable(page_html: str) -> str:
    """Table cells' inline code with a line break allowed before ``{`` and, but in a row's first
    cell (a name that stays whole beside other columns), after ``_ . ,`` and ``-`` within a word.

    >>> breakable("<tr><td><code>a_b{c}</code></td><td><code>nbstream_x</code> and <code>--a-b</code></td></tr>")
    '<tr><td><code>a_b<wbr>{c}</code></td><td><code>nbstream_<wbr>x</code> and <code>--a-<wbr>b</code></td></tr>'
    """

    def code(match: re.Match[str], first: bool) -> str:
        text = match[1] if first else re.sub(r"([_.,]|(?<=\w)-(?=\w))", r"\1<wbr>", match[1])
        return "<code>" + text.replace("{", "<wbr>{") + "</code>"

    def row(cells: re.Match[str]) -> str:
        position = 0

        def cell(match: re.Match[str]) -> str:
            nonlocal position
            first, position = position == 0, position + 1
            return match[1] + CODE.sub(lambda inline: code(inline, first), match[2]) + match[3]

        return CELL.sub(cell, cells[0])

    return ROW.sub(row, page_html)


def labelled(page_html: str) -> str:
    """Every table cell with its column's header as ``data-label``.

    >>> print(labelled("<table><tr><th>a <em>b</em></th><th></th></tr><tr><td>1</td><td>2</td></tr></table>"))
    <table><tr><th>a <em>b</em></th><th></th></tr><tr><td data-label="a b">1</td><td data-label="">2</td></tr></table>
    """

    def table(match: re.Match[str]) -> str:
        headers = [html.escape(TAG.sub("", header).strip(), quote=True) for header in HEADER.findall(match[1])]

        def row(cells: re.Match[str]) -> str:
            labels = iter(headers)
            return re.sub(r"<td(?=[\s>])", lambda cell: f'<td data-label="{next(labels, "")}"', cells[0])

        return "<table>" + ROW.sub(row, match[1]) + "</table>"

    return TABLE.sub(table, page_html)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return labelled(breakable(html))


def on_post_build(config: Any) -> None:
    index = Path(config.site_dir) / "search" / "search_index.json"
    if index.exists():
        script = index.with_suffix(".js")
        script.write_text(f"var __index = {index.read_text(encoding='utf-8')}", encoding="utf-8")
