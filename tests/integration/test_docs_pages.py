"""What the README and the documentation show is what the program prints: every result block is
the output of a command this test runs (``<!-- output: COMMAND -->``) or of the code block above
it on a page this test runs block by block, in order, as a reader would (``<!-- output: above
-->``; tests/helpers/doc_pages.py has the comments). The pages run here: the README and the
tutorials, each in a folder of its own holding links to ``scripts`` and ``.venv``, with no
``NBSTREAM_*`` variable but those below (a broker's folder, the demo using the .venv as it is).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.doc_pages import Block, PageRun, blocks, normalised
from tests.helpers.paths import REPO, data_dir, missing_data, script
from tests.helpers.service import free_port

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# The pages run block by block, and what each needs besides the .venv (a missing one skips the
# page on a developer machine and fails it in CI).
RUN_PAGES = {
    "README.md": (),
    "docs/getting-started.md": (),
    "docs/tutorials/streaming-drift.md": (),
    "docs/tutorials/merging-shards.md": (),
    "docs/tutorials/kafka-delayed-labels.md": ("java", "mvn"),
    "docs/tutorials/schema-registry.md": ("java", "mvn"),
    "docs/tutorials/spark.md": ("java", "pyspark"),
}
RESULT_LANGUAGES = ("text", "")  # a block in any other language is code, or a file's contents
# Pages whose results this test cannot produce: the benchmarks' figures (a machine's, measured by
# the scripts each section names) and what a Spark cluster answers.
MEASURED_ELSEWHERE = ("docs/performance.md", "docs/spark.md")


def every_block() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def shown_for(command: str) -> list[Block]:
    return [block for block in every_block() if block.directive == ("output", command)]


def page_env(folder: Path, monkeypatch) -> dict[str, str]:
    """The environment of a page's run: this one without NBSTREAM_* variables (a reader has none),
    the local broker and registry in the run's folder, a free metrics port, and the demo on the
    .venv the tests run in (setting it up again takes a minute)."""
    for name in [name for name in os.environ if name.startswith("NBSTREAM_")]:
        monkeypatch.delenv(name)
    return {"NBSTREAM_BROKER_DIR": str(folder / "kafka"), "NBSTREAM_REGISTRY_DIR": str(folder / "registry"),
            "METRICS_PORT": str(free_port()), "NBSTREAM_DEMO_SKIP_SETUP": "1", "PYTHONUNBUFFERED": "1"}


def missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"this page's run needs {what}")
    pytest.skip(f"this page's run needs {what}")


def test_every_result_block_says_what_prints_it():
    unmarked = [block.where for block in every_block()
                if block.info in RESULT_LANGUAGES and not block.where.startswith(MEASURED_ELSEWHERE)
                and (block.directive is None or block.directive[0] not in ("output", "not output"))]
    assert not unmarked, f"result blocks without <!-- output: ... --> or <!-- not output: ... -->: {unmarked}"
    bare = [block.where for block in every_block()
            if block.info == "" and not block.where.startswith(MEASURED_ELSEWHERE)]
    assert not bare, f"fenced blocks without a language (``text`` for a result): {bare}"


def test_outputs_of_the_block_above_are_on_pages_that_run():
    strays = [block.where for block in every_block() if block.directive == ("output", "above")
              and block.page.relative_to(REPO).as_posix() not in RUN_PAGES]
    assert not strays, f"<!-- output: above --> on a page this test does not run: {strays}"
    misplaced = [block.where for block in every_block()
                 if block.directive and block.directive[0] == "output" and block.info not in RESULT_LANGUAGES]
    assert not misplaced, f"<!-- output: ... --> above a block that is not a ``text`` block: {misplaced}"


COMMANDS = sorted({block.directive[1] for block in every_block()
                   if block.directive and block.directive[0] == "output" and block.directive[1] != "above"})


@pytest.mark.parametrize("command", COMMANDS)
def test_a_shown_output_is_what_its_command_prints(command, tmp_path, monkeypatch):
    env = page_env(tmp_path, monkeypatch)
    if not (REPO / ".venv" / "bin" / "worker").exists():
        missing(".venv (scripts/setup.sh test)")
    path = f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(["bash", "-c", command], cwd=REPO, env={**os.environ, **env, "PATH": path},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for block in shown_for(command):
        assert normalised(block.text) == normalised(done.stdout), \
            f"{block.where} shows another output than the command printed:\n{done.stdout}"


@pytest.mark.parametrize("page", sorted(RUN_PAGES))
def test_a_page_runs_as_written_and_prints_what_it_shows(page, tmp_path, monkeypatch):
    for tool in RUN_PAGES[page]:
        if tool == "pyspark":
            try:
                import pyspark  # noqa: F401
            except ImportError:
                missing("pyspark")
        elif shutil.which(tool) is None:
            missing(tool)
    if not (REPO / ".venv" / "bin" / "worker").exists():
        missing(".venv (scripts/setup.sh test)")
    page_blocks = blocks(REPO / page)
    mnist = data_dir() / "mnist"
    with_mnist = any(block.directive == ("run", "with MNIST") for block in page_blocks)
    if with_mnist and not mnist.is_dir() and os.environ.get("CI"):
        missing_data("MNIST")
    env = page_env(tmp_path, monkeypatch)
    run = PageRun(tmp_path / "page", env, mnist=mnist if with_mnist and mnist.is_dir() else None)
    try:
        printed = None
        for block in page_blocks:
            if block.directive == ("output", "above"):
                if printed is not None:
                    assert normalised(block.text) == normalised(printed), \
                        f"{block.where} shows another output than its block printed:\n{printed}"
                continue
            printed = None
            if block.info not in ("bash", "python") or (block.directive and block.directive[0] == "not run"):
                continue
            if block.directive == ("run", "with MNIST") and run.mnist is None:
                continue  # (on a developer machine without MNIST; in CI it fails above)
            printed = run.run(block)
    finally:
        run.close()
        for script, folder in (("kafka_broker.py", "kafka"), ("schema_registry.py", "registry")):
            if (tmp_path / folder).exists():  # a run that stopped halfway leaves them running
                stop = [sys.executable, str(REPO / "scripts" / script), "stop", "--dir", str(tmp_path / folder)]
                subprocess.run(stop, capture_output=True, timeout=120)


def test_the_drift_page_shows_the_tables_drift_recovery_prints():
    """docs/drift.md's results are what scripts/drift_recovery.py prints (measured here without its figure)."""
    data = data_dir()
    if not (data / "mnist").is_dir() or not (data / "sms_spam" / "SMSSpamCollection").is_file():
        missing_data("MNIST and the SMS Spam Collection")
    recovery = script("drift_recovery")
    results, _ = recovery.measure(data)
    assert recovery.table(results) in (REPO / "docs" / "drift.md").read_text()
