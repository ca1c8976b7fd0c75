"""The CLI's error boundary: user errors are one line with exit status 2; bugs surface as bugs."""

from __future__ import annotations

import worker.batch.train
from tests.helpers.cli import invoke
from tests.helpers.paths import SMS


def test_a_user_error_is_one_line_with_exit_status_2(tmp_path):
    result = invoke("train", SMS / "train.parquet", "--label", "nope", "--text", "text", "--out", tmp_path / "m.nbs")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {SMS / 'train.parquet'}: label column 'nope' not found; columns are ['id', 'label', 'text']."]


def test_an_internal_error_is_not_disguised_as_a_user_error(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("an internal bug")

    monkeypatch.setattr(worker.batch.train, "extract_labels", broken)
    result = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--out", tmp_path / "m.nbs")
    assert result.exit_code == 1
    assert isinstance(result.exception, ValueError) and "an internal bug" in str(result.exception)
    assert "error: an internal bug" not in result.output


def test_labels_of_two_types_across_files_are_a_user_error(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"v": [[1, 2]], "label": [1]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"v": [[1, 2]], "label": ["one"]}), tmp_path / "b.parquet")
    result = invoke("train", tmp_path / "a.parquet", tmp_path / "b.parquet", "--label", "label", "--features", "v",
                    "--out", tmp_path / "m.nbs")
    assert result.exit_code == 2
    assert "b.parquet: rows 0 to 0, column 'label': labels mix numbers and strings" in result.output


def test_version_and_model_names_in_any_case(tmp_path):
    import nbstream as library
    from tests.helpers.cli import invoke

    assert invoke("--version").output.strip() == f"nbstream {library.__version__}"
    result = invoke("train", "x.parquet", "--label", "y", "--model", "bernouli", "--out", tmp_path / "m.nbs")
    assert result.exit_code == 2 and "did you mean bernoulli?" in result.output
