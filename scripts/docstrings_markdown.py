"""A griffe extension for the API reference (mkdocs.yml): nbstream's docstrings as Markdown.

The docstrings are written to be read in ``help()``: "name : description" items whose
continuation lines are indented four spaces (numpy's item layout), numpy section headers,
``code`` in double backticks, doctests in the text. Parsed as numpy sections, the prose
between items becomes parameters that do not exist; read as Markdown, the lines of a list
run together and a doctest's ">>>" becomes a quote. This hook gives them the Markdown they
mean, before mkdocstrings renders them (with ``docstring_style: null``):

- a section header ("Parameters" over a line of dashes) becomes a bold line;
- an item ("name : description", with its indented continuation lines) becomes a list entry,
  with a dash where a gap of spaces parts a type from its description;
- a doctest (">>>" lines and their output, up to a blank line) becomes a ``pycon`` block;
- brackets, angle brackets and double stars in the prose are literal (``x[i][j]`` is no link).
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

SECTION_RULE = re.compile(r"^-{3,}$")
ITEM = re.compile(r"^(?P<names>[A-Za-z_][\w.]*(?:, [A-Za-z_][\w.]*)*) : (?P<text>.*)$")
GAP = re.compile(r"(?<=\S) {2,}(?=\S)")
CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")
LITERAL = {"[": r"\[", "]": r"\]", "<": "&lt;", "**": r"\*\*"}
LITERAL_PATTERN = re.compile(r"\*\*|[\[\]<]")


def literal(text: str) -> str:
    """Prose with Markdown's link, HTML and strong markers escaped; code spans kept as they are."""
    parts = CODE_SPAN.split(text)
    return "".join(part if index % 2 else LITERAL_PATTERN.sub(lambda m: LITERAL[m[0]], part)
                   for index, part in enumerate(parts))


def to_markdown(docstring: str) -> str:
    """The Markdown a plain-text docstring means (see the module's docstring)."""
    lines, out, i = docstring.splitlines(), [], 0
    in_list = False
    while i < len(lines):
        line = lines[i]
        item = ITEM.match(line)
        if in_list and line.strip() and not item:
            out.append("")  # a paragraph after a list is not part of its last entry
        in_list = False
        if line.startswith(">>>"):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += ["", "```pycon", *block, "```", ""]
        elif i + 1 < len(lines) and line.strip() and SECTION_RULE.match(lines[i + 1].strip()):
            out += ["", f"**{line.strip()}**", ""]
            i += 2
        elif item:
            text = [GAP.sub(" — ", item["text"].rstrip(), count=1)]  # "type   description"
            i += 1
            while i < len(lines) and lines[i].startswith("    "):
                text.append(lines[i].strip())
                i += 1
            if out and out[-1].strip() and not out[-1].startswith("- "):
                out.append("")  # a list starts after a blank line
            out.append(f"- `{item['names']}` : {literal(' '.join(text))}")
            in_list = True
        else:
            out.append(literal(line))
            i += 1
    return "\n".join(out).strip("\n")


class DocstringsAsMarkdown(Extension):
    """Rewrites every docstring's text when griffe loads it."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
