"""The fenced blocks of the README and the documentation pages, and a run of a page's code blocks
in order, as a reader would type them (tests/integration/test_docs_pages.py).

A comment line directly above a fenced block says what it is (CONTRIBUTING.md, Documentation):

    <!-- output: COMMAND -->        a result block: what COMMAND prints on stdout, run alone
    <!-- output: above -->          a result block: what the code block above it prints, when the
                                    page is run
    <!-- not output: WHY -->        a text block that is no command's output (a diagram, a map)
    <!-- not run: WHY -->           a code block a run of the page leaves out (it needs the network,
                                    or installs what the tests have already)
    <!-- run: with MNIST -->        a code block run only where MNIST is (data/mnist is linked to it)

Every ``text`` block needs one of the output comments, so that no result is shown unchecked.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from .paths import REPO

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>[^`]*)$")
DIRECTIVE = re.compile(r"^\s*<!-- (?P<key>output|not output|not run|run): (?P<value>.+?) -->\s*$")
# What differs from run to run, replaced on both sides before comparing: a duration, a rate, a
# temporary folder, a time stamp, the prequential quality of a service whose labels come when they do.
VARIES = [
    (re.compile(r"^(nbstream_prequential_\w+(\{[^}]*\})?) \S+$", re.MULTILINE), r"\1 <varies>"),
    (re.compile(r"in \d+(\.\d+)?s, [\d,]+ rows/s"), "in <time>, <rate> rows/s"),
    (re.compile(r"/tmp/nbstream-demo\.\w+/"), "/tmp/nbstream-demo.XXXXXX/"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00"), "<time>"),
]


@dataclass
class Block:
    """A fenced block: its language (``info``), its text, where it starts, and the comment above it."""

    page: Path
    line: int
    info: str
    text: str
    directive: tuple[str, str] | None = None

    @property
    def where(self) -> str:
        page = self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page
        return f"{page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a Markdown page, in order (a block indented in a list is unindented)."""
    found: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence = len(opened["indent"]), opened["fence"]
        above = DIRECTIVE.match(lines[i - 1]) if i else None
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        found.append(Block(page, i - len(body), opened["info"].strip().split(" ")[0], "\n".join(body) + "\n",
                           (above["key"], above["value"]) if above else None))
        i += 1
    return found


def normalised(text: str) -> str:
    for pattern, replacement in VARIES:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


@dataclass
class PageRun:
    """A page's code blocks run in order in ``folder``, which holds links to the repository's
    ``scripts`` and ``.venv`` (and ``data/mnist`` when given): the bash blocks in one bash process,
    so that what one sets (a variable, the active .venv) holds for the next, and the Python blocks in
    one interpreter, sharing their names. ``env`` is added to the environment of both."""

    folder: Path
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 300.0
    mnist: Path | None = None
    _shells: dict[str, subprocess.Popen] = field(default_factory=dict)
    _status: dict[str, object] = field(default_factory=dict)
    _count: int = 0

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for name in ("scripts", ".venv"):
            (self.folder / name).symlink_to(REPO / name)
        if self.mnist is not None:
            (self.folder / "data").mkdir()
            (self.folder / "data" / "mnist").mkdir()
            for gz in self.mnist.glob("*.gz"):
                (self.folder / "data" / "mnist" / gz.name).symlink_to(gz)
        self.log = self.folder / "run.log"

    def run(self, block: Block) -> str:
        """Run one code block; what it printed on stdout. A block that fails (or takes longer than
        ``timeout``) fails the test with the log of the run."""
        self._count += 1
        code = self.folder / f".block-{self._count}.{'py' if block.info == 'python' else 'sh'}"
        out = self.folder / f".block-{self._count}.out"
        code.write_text(block.text)
        language = "python" if block.info == "python" else "bash"
        shell = self._shell(language)
        command = (f"{code}\t{out}\n" if language == "python"
                   else f"source {code} >{out} 2>>{self.log} 3>&-; echo ok >&3\n")
        assert shell.stdin is not None
        shell.stdin.write(command)
        shell.stdin.flush()
        status = self._status[language]
        ready, _, _ = select.select([status], [], [], self.timeout)
        answer = status.readline() if ready else "timed out"  # type: ignore[attr-defined]
        if answer.strip() != "ok":
            raise AssertionError(f"{block.where} {'failed' if answer else 'ended its shell'} "
                                 f"({answer.strip() or 'exit'}); the run's log:\n{self.log_tail()}")
        return out.read_text()

    def log_tail(self, characters: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-characters:] if self.log.exists() else ""

    def _shell(self, language: str) -> subprocess.Popen:
        if language not in self._shells:
            # Python started after bash blocks sees what they exported, as in a reader's terminal
            env = self._exported() if "bash" in self._shells else {**os.environ, **self.env}
            read, write = os.pipe()
            with open(self.log, "a") as log:
                if language == "python":
                    command = [sys.executable, "-c", PYTHON_SERVER, str(write)]
                else:
                    command = ["bash", "-c", f"exec 3>&{write} {write}>&-; set -euo pipefail\n"
                               "while IFS= read -r line; do eval \"$line\"; done"]
                self._shells[language] = subprocess.Popen(
                    command, cwd=self.folder, env=env, stdin=subprocess.PIPE, stdout=log, stderr=log, text=True,
                    pass_fds=(write,), start_new_session=True)
            os.close(write)
            self._status[language] = os.fdopen(read)
        return self._shells[language]

    def _exported(self) -> dict[str, str]:
        """The environment the bash blocks have left (what they exported included)."""
        dump = self.folder / ".environment"
        self.run(Block(self.folder / "environment", 0, "bash", f"env -0 > {dump}\n"))
        return dict(entry.split("=", 1) for entry in dump.read_text().split("\0") if "=" in entry)

    def close(self) -> None:
        """Ends both interpreters and whatever the blocks left running in their process groups."""
        for shell in self._shells.values():
            if shell.stdin:
                shell.stdin.close()
            try:
                shell.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(shell.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            shell.wait()
        for status in self._status.values():
            status.close()  # type: ignore[attr-defined]


# A Python interpreter that runs the files it is given on stdin (one "CODE<TAB>OUT" line each) in
# one namespace, each block's stdout into OUT, and answers "ok" (or the exception) on the fd given.
PYTHON_SERVER = textwrap.dedent("""
    import contextlib, os, sys, traceback
    status = os.fdopen(int(sys.argv[1]), "w")
    namespace = {"__name__": "__main__"}
    for line in sys.stdin:
        code, out = line.rstrip("\\n").split("\\t")
        with open(out, "w") as printed, contextlib.redirect_stdout(printed):
            try:
                exec(compile(open(code).read(), code, "exec"), namespace)
                answer = "ok"
            except BaseException as error:
                traceback.print_exc()
                answer = f"{type(error).__name__}: {error}".replace("\\n", " ")
        print(answer, file=status, flush=True)
""")

