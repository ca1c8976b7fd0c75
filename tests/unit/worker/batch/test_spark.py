"""`--engine spark` before Spark starts: what the driver lacks, named with the extra that brings it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.paths import REPO

pytest.importorskip("pyspark")

WITHOUT = """
import sys

BLOCKED = sys.argv.pop(1)

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Block())
import worker
worker.main()
"""


@pytest.mark.parametrize(("missing", "master", "extra"), [("pandas", "local[1]", "spark"),
                                                         ("grpc", "sc://127.0.0.1:1", "spark-connect")])
def test_a_driver_without_what_spark_needs_is_told_the_extra(tmp_path, missing, master, extra):
    (tmp_path / "a.parquet").write_bytes(b"")
    result = subprocess.run([sys.executable, "-c", WITHOUT, missing, "train", str(tmp_path / "a.parquet"), "--label",
                             "y", "--features", "x", "--out", str(tmp_path / "m.nbs"), "--engine", "spark",
                             "--master", master], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: --engine spark") and result.stderr.count("\n") == 1
    assert result.stderr.rstrip().endswith(f"pip install 'nbstream[{extra}]'."), result.stderr
