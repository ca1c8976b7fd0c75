"""docs/layout.md, the map of the code, stays true: every module and package of the library and the
worker is named there with its job, and nothing it names is gone."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "layout.md"
MAPPED = ("nbstream", "worker")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.py|/)")


def entries(page: str) -> dict[str, str]:
    """path -> job of every entry of the page's first code block: a line of names (``a.py`` or
    ``folder/``, several on one line for modules of one kind) then, after two spaces or more, the
    job; a line indented two more than a folder's is inside it; a line that starts with no name
    continues the job above."""
    block = page.split("```", 2)[1].split("\n", 1)[1]
    found: dict[str, str] = {}
    folders: list[tuple[int, str]] = []  # (indent, path) of the folders open
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        head, _, job = line.strip().partition("  ")
        names = head.split()
        if not names or not all(NAME.fullmatch(name) for name in names):
            continue  # a job's continuation
        while folders and folders[-1][0] >= indent:
            folders.pop()
        parent = folders[-1][1] if folders else ""
        for name in names:
            found[parent + name] = job.strip()
        if len(names) == 1 and names[0].endswith("/"):
            folders.append((indent, parent + names[0]))
    return found


def modules() -> set[str]:
    """Every package (``folder/``) and module (``a.py``) of the library and the worker."""
    found = set()
    for root in MAPPED:
        for path in (REPO / root).rglob("*.py"):
            relative = path.relative_to(REPO).as_posix()
            found.add(relative.removesuffix("__init__.py") if path.name == "__init__.py" else relative)
    return found


def test_every_module_is_on_the_map_with_its_job():
    named = entries(PAGE.read_text())
    missing = sorted(modules() - set(named))
    assert not missing, f"docs/layout.md does not name {missing}"
    jobless = sorted(path for path in modules() if not named[path])
    assert not jobless, f"docs/layout.md names {jobless} without saying what each is for"


def test_the_map_names_nothing_that_is_gone():
    named = {path for path in entries(PAGE.read_text()) if path.startswith(tuple(f"{root}/" for root in MAPPED))}
    gone = sorted(named - modules())
    assert not gone, f"docs/layout.md names {gone}, which are not in the code"


def test_the_reader_of_the_map_reads_folders_and_lines_of_several_modules():
    page = "```\nlib/          the library\n  a.py b.py    two of a kind\n  sub/        a folder\n    c.py      " \
           "its module, whose job\n                goes on here\n  d.py        back in lib\n```\n"
    assert entries(page) == {"lib/": "the library", "lib/a.py": "two of a kind", "lib/b.py": "two of a kind",
                             "lib/sub/": "a folder", "lib/sub/c.py": "its module, whose job", "lib/d.py": "back in lib"}
