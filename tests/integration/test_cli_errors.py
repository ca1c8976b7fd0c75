"""The CLI's error boundary: user errors are one line with exit status 2; bugs surface as bugs."""

from __future__ import annotations

import nbstream.arrow.learning
from tests.helpers.cli import invoke, run_worker
from tests.helpers.paths import SMS


def test_a_user_error_is_one_line_with_exit_status_2(tmp_path):
    result = invoke("train", SMS / "train.parquet", "--label", "nope", "--text", "text", "--out", tmp_path / "m.nbs")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {SMS / 'train.parquet'}: label column 'nope' not found; columns are ['id', 'label', 'text']."]


def test_an_internal_error_is_not_disguised_as_a_user_error(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("an internal bug")

    monkeypatch.setattr(nbstream.arrow.learning, "extract_labels", broken)
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


# ---- what the operating system refuses: one line naming the path ----------------------------

import os  # noqa: E402
import subprocess  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(scope="module")
def spam_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("model") / "m.nbs"
    assert invoke("train", SMS / "test.parquet", "--label", "label", "--text", "text", "--out", out).exit_code == 0
    return out


def _one_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize("command", ["train", "predict", "merge", "rejects"])
def test_an_output_path_that_cannot_be_written_is_named(tmp_path, spam_model, command):
    (tmp_path / "a-directory").mkdir()
    with_bad_row = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"v": [1.0, 2.0], "label": [1.0, 2.5]}), with_bad_row)
    (tmp_path / "a-file").write_text("")
    unwritable = (tmp_path / "a-file", "File exists") if command == "rejects" else \
        (tmp_path / "a-directory", "s a directory")
    for target, reason in (unwritable, ("/proc/nbstream-test", "No such file")):
        args = {"train": ("train", SMS / "test.parquet", "--label", "label", "--text", "text", "--out", target),
                "predict": ("predict", spam_model, SMS / "test.parquet", "--out", target),
                "merge": ("merge", spam_model, spam_model, "--out", target),
                "rejects": ("train", with_bad_row, "--label", "label", "--features", "v", "--model", "gaussian",
                            "--skip-invalid", "--rejects", target, "--out", tmp_path / "g.nbs", "--fresh")}[command]
        line = _one_line(invoke(*args))
        assert line.startswith(f"error: {target}") and reason in line and ".tmp" not in line, line


@pytest.mark.parametrize("make", [os.mkfifo, lambda path: os.symlink("/dev/zero", path)], ids=["fifo", "device"])
def test_an_input_that_is_not_a_regular_file_is_refused_at_once(tmp_path, spam_model, make):
    make(tmp_path / "input.parquet")
    line = _one_line(invoke("predict", spam_model, tmp_path / "input.parquet", "--out", tmp_path / "p.parquet"))
    assert "input.parquet: is a" in line and "not a Parquet file" in line


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs (needs the right to mount; skipped where there is none)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_is_one_line_and_leaves_no_partial_file(full_disk, spam_model):
    line = _one_line(invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text",
                            "--out", full_disk / "m.nbs"))
    assert line == f"error: {full_disk / 'm.nbs'}: cannot write the snapshot (No space left on device)"
    (full_disk / "filler").write_bytes(b"x" * 60_000)
    line = _one_line(invoke("predict", spam_model, SMS / "test.parquet", "--proba", "--out", full_disk / "p.parquet"))
    assert line == f"error: {full_disk / 'p.parquet'}: cannot write (No space left on device)"
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]


@pytest.mark.parametrize("option", ["--kafka-config", "--sasl-password-file", "--ssl-cafile"])
@pytest.mark.parametrize("kind, make", [("fifo", os.mkfifo), ("device", lambda path: os.symlink("/dev/zero", path)),
                                        ("directory", os.mkdir)])
def test_a_settings_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, option, kind, make):
    """A FIFO would wait for a writer forever and /dev/zero would be read without end."""
    path = tmp_path / "settings"
    make(path)
    security = {"--kafka-config": [], "--ssl-cafile": ["--security-protocol", "SSL"],
                "--sasl-password-file": ["--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN",
                                         "--sasl-username", "u"]}[option]
    done = run_worker("serve", "--bootstrap", "127.0.0.1:9", "--input", "t", "--output", "t.out", "--group", "g",
                      "--text-features", "--model", "multinomial", *security, option, path, timeout=60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    reason = "a directory, not a file" if kind == "directory" else "not a regular file"
    assert f"{option} {path}: {reason}" in lines[0]


def test_a_settings_file_too_large_or_not_utf8_is_one_line(tmp_path):
    (tmp_path / "big").write_bytes(b"#" * (2 << 20))
    (tmp_path / "latin1").write_bytes(b"client.id=caf\xe9\n")
    for name, reason in (("big", "larger than 1,048,576 bytes"), ("latin1", "not UTF-8 text")):
        done = run_worker("export", "--bootstrap", "127.0.0.1:9", "--input", "t", "--group", "g",
                          "--out", tmp_path / "m.nbs", "--kafka-config", tmp_path / name, timeout=60)
        assert done.returncode == 2 and f"--kafka-config {tmp_path / name}: {reason}." in done.stderr, done.stderr


def test_help_says_how_the_kafka_client_is_chosen():
    shown = " ".join(invoke("produce", "--help", env={"COLUMNS": "200"}).output.replace("│", " ").split())
    assert "auto: confluent where it is installed, else kafka-python" in shown
    assert "[default: auto]" in shown


@pytest.mark.parametrize("option, value", [("--transaction-timeout", "inf"), ("--transaction-timeout", "1e12"),
                                           ("--session-timeout", "inf"), ("--session-timeout", "1e9")])
def test_timeouts_outside_what_a_broker_accepts_are_refused_before_connecting(option, value):
    result = invoke("serve", "--bootstrap", "127.0.0.1:9", "--input", "t", "--output", "t.out", "--group", "g",
                    "--text-features", "--model", "multinomial", option, value)
    assert result.exit_code == 2 and f"Invalid value for '{option}'" in " ".join(result.output.split()), result.output


def test_a_rate_too_small_to_wait_for_is_one_line():
    line = _one_line(invoke("produce", "--bootstrap", "127.0.0.1:9", "--topic", "t", SMS / "test.parquet",
                            "--text", "text", "--rate", "1e-300"))
    assert line == "error: --rate must be 0 (as fast as possible) or at least 0.001 rows per second; got 1e-300."


@pytest.mark.parametrize("command", ["predict", "merge"])
@pytest.mark.parametrize("make", [os.mkfifo, lambda path: os.symlink("/dev/null", path)], ids=["fifo", "device"])
def test_an_output_path_that_is_a_fifo_or_a_device_is_left_as_it_is(tmp_path, spam_model, command, make):
    """Written beside and renamed into place, an output would replace the FIFO or the device node itself."""
    target = tmp_path / "out"
    make(target)
    before = os.lstat(target)
    args = {"predict": ("predict", spam_model, SMS / "test.parquet", "--out", target),
            "merge": ("merge", spam_model, spam_model, "--out", target)}[command]
    line = _one_line(invoke(*args))
    assert line.startswith(f"error: {target}: cannot write") and "a device, FIFO or socket" in line, line
    assert os.lstat(target).st_mode == before.st_mode and os.lstat(target).st_ino == before.st_ino


@pytest.mark.parametrize("which", ["data", "model"])
def test_predictions_never_replace_what_they_are_made_from(tmp_path, spam_model, which):
    data = tmp_path / "test.parquet"
    data.write_bytes((SMS / "test.parquet").read_bytes())
    model = tmp_path / "model.nbs"
    model.write_bytes(spam_model.read_bytes())
    target = {"data": data, "model": model}[which]
    before = target.read_bytes()
    line = _one_line(invoke("predict", model, data, "--out", target))
    assert line == f"error: --out {target} is also an input ({target}); the predictions would replace it."
    assert target.read_bytes() == before


@pytest.mark.parametrize("target", ["first", "second", "a hard link to the second"])
def test_a_merge_never_replaces_a_snapshot_it_merges(tmp_path, spam_model, target):
    inputs = [tmp_path / "a.nbs", tmp_path / "b.nbs"]
    for path in inputs:
        path.write_bytes(spam_model.read_bytes())
    out = {"first": inputs[0], "second": inputs[1], "a hard link to the second": tmp_path / "link.nbs"}[target]
    if not out.exists():
        os.link(inputs[1], out)
    replaced = inputs[0] if target == "first" else inputs[1]
    before = replaced.read_bytes()
    line = _one_line(invoke("merge", *inputs, "--out", out))
    assert line == f"error: --out {out} is also an input ({replaced}); the merged model would replace it."
    assert replaced.read_bytes() == before


def test_a_directory_is_read_recursively_without_hidden_files_and_a_stranger_is_named(tmp_path, spam_model):
    folder = tmp_path / "data"
    (folder / "day=2" / "_temporary").mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes((SMS / "test.parquet").read_bytes())
    (folder / "day=2" / "part-1.parquet").write_bytes((SMS / "test.parquet").read_bytes())
    for leftover in ("_SUCCESS", ".part-0.parquet.crc", "day=2/_temporary/part-9"):
        (folder / leftover).write_bytes(b"not parquet")
    result = invoke("predict", spam_model, folder, "--out", tmp_path / "p.parquet")
    assert result.exit_code == 0 and "wrote 2,230 predictions" in result.output, result.output
    (folder / "README").write_text("not parquet either")  # sorted first: Arrow inferred its schema from it
    line = _one_line(invoke("predict", spam_model, folder, "--out", tmp_path / "p.parquet"))
    assert line.startswith(f"error: {folder / 'README'}: cannot read as Parquet")


@pytest.mark.parametrize("options, expected", [
    (["--features-field", "label"], "--features-field 'label' is also the --label-field; give each field one role."),
    (["--text-features", "--text-field", "label"],
     "--text-field 'label' is also the --label-field; give each field one role."),
])
def test_serve_refuses_a_message_field_with_two_roles_before_connecting(options, expected):
    done = run_worker("serve", "--bootstrap", "127.0.0.1:9", "--input", "t", "--output", "t.out", "--group", "g",
                      *options, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and f"ERROR worker.serve: {expected}" in lines[0], done.stderr


def test_serve_reports_a_value_that_does_not_parse_in_one_line():
    done = run_worker("serve", "--bootstrap", "127.0.0.1:9", "--input", "t", "--output", "t.out", "--group", "g",
                      "--labels-topic", "t.labels", "--label-ttl", "5x", timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "ERROR worker.serve: --label-ttl must be a positive duration such as 90s, 15m, 36h or 7d; got '5x'." \
        in lines[0]


def _categories(tmp_path, n_classes: int):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "categories.parquet"
    labels = [f"l{i % n_classes}" for i in range(2 * n_classes)]
    pq.write_table(pa.table({"c": ["u", "v"] * n_classes, "label": labels}), path)
    return path


def test_min_categories_past_what_the_tables_hold_is_one_line_before_allocating(tmp_path):
    line = _one_line(invoke("train", _categories(tmp_path, 2), "--label", "label", "--features", "c", "--model",
                            "categorical", "--min-categories", "1000000000", "--out", tmp_path / "m.nbs"))
    assert line == ("error: --min-categories must be None or an integer >= 1 and <= 16777216, or one per feature; "
                    "got 1000000000.")
    assert not (tmp_path / "m.nbs").exists()


def test_serve_refuses_min_categories_past_what_the_tables_hold_in_one_line():
    done = run_worker("serve", "--bootstrap", "127.0.0.1:9", "--input", "t", "--output", "t.out", "--group", "g",
                      "--feature-names", "a", "--model", "categorical", "--min-categories", "1000000000", timeout=60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "--min-categories must be None or an integer >= 1 and <= 16777216" in lines[0]


def test_classes_too_many_for_min_categories_are_one_line_before_allocating(tmp_path):
    data = _categories(tmp_path, 20)  # 20 classes x 2**24 categories: 2**28 cells and more
    line = _one_line(invoke("train", data, "--label", "label", "--features", "c", "--model", "categorical",
                            "--min-categories", "16777216", "--out", tmp_path / "m.nbs"))
    assert line.startswith(f"error: {data}: rows 0 to 39: CategoricalNB's tables would hold 335,544,320 (class, "
                           "category) cells: 20 classes x 16,777,216 categories")
    assert line.endswith("lower min_categories (16777216) or learn fewer classes.")
