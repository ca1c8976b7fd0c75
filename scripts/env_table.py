"""The table of environment variables in docs/environment.md, generated from the worker's options.

    python scripts/env_table.py           # print the table (Markdown)
    python scripts/env_table.py --write   # put it into docs/environment.md, between its markers

Every option of every command reads one environment variable; the table has one row per
variable: the variable, the option and the commands that have it. A test asserts that the page
holds exactly the table printed here, so an option cannot go undocumented.
"""

from __future__ import annotations

import argparse
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "environment.md"
BEGIN = "<!-- begin: the table printed by scripts/env_table.py -->"
END = "<!-- end: the table printed by scripts/env_table.py -->"


def environment_variables() -> dict[tuple[str, str], list[str]]:
    """(variable, option) -> the commands whose option reads that variable, in name order.

    An option without a variable has the variable "".
    """
    import typer.main

    from worker.cli import app

    variables: dict[tuple[str, str], list[str]] = {}
    for name, command in sorted(typer.main.get_command(app).commands.items()):
        for param in command.params:
            if param.param_type_name == "option" and param.opts[0] != "--help":
                variables.setdefault((param.envvar or "", param.opts[0]), []).append(name)
    return variables


def table(variables: dict[tuple[str, str], list[str]]) -> str:
    """The Markdown table, one row per (variable, option), sorted by variable."""
    rows = [f"| `{variable}` | `{option}` | {', '.join(commands)} |"
            for (variable, option), commands in sorted(variables.items())]
    return "\n".join(["| variable | option | commands |", "|---|---|---|", *rows])


def table_on_page(page: str) -> str:
    """The text between the page's markers, without the blank lines around it."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{PAGE.relative_to(REPO)} lacks the markers {BEGIN!r} and {END!r}")
    return page[start + len(BEGIN):end].strip("\n")


def with_table(page: str, new_table: str) -> str:
    """The page with the text between its markers replaced by ``new_table``."""
    table_on_page(page)  # the markers are there
    start, end = page.find(BEGIN) + len(BEGIN), page.find(END)
    return page[:start] + "\n\n" + new_table + "\n\n" + page[end:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"update {PAGE.relative_to(REPO)} in place")
    args = parser.parse_args()
    generated = table(environment_variables())
    if args.write:
        PAGE.write_text(with_table(PAGE.read_text(), generated))
    else:
        print(generated)


if __name__ == "__main__":
    main()
