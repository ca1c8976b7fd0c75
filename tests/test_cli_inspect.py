"""`worker inspect` through Typer's CliRunner."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import nbstream
from worker.cli import app

runner = CliRunner()


def test_inspect_shows_kind_classes_counts_and_metadata(tmp_path):
    model = nbstream.MultinomialNB(alpha=0.5).partial_fit([[1, 2], [3, 0], [0, 1]], ["spam", "ham", "spam"])
    path = nbstream.save(model, tmp_path / "m.nbs", meta={"source": "sms.parquet"})
    result = runner.invoke(app, ["inspect", str(path)])
    assert result.exit_code == 0, result.output
    assert "kind:           multinomial" in result.output
    assert "examples seen:  3" in result.output
    assert "MultinomialNB(alpha=0.5)" in result.output
    assert "classes (open):" in result.output
    assert "spam" in result.output and "ham" in result.output
    assert '{"source": "sms.parquet"}' in result.output


def test_inspect_json_and_corrupt_files(tmp_path):
    path = nbstream.save(nbstream.GaussianNB().fit([[0.0], [1.0]], [0, 1]), tmp_path / "g.nbs")
    result = runner.invoke(app, ["inspect", "--json", str(path)])
    assert json.loads(result.output)["kind"] == "gaussian"
    path.write_bytes(path.read_bytes()[:-1])
    result = runner.invoke(app, ["inspect", str(path)])
    assert result.exit_code == 2
    assert "checksum mismatch" in result.output
