"""The charts of the benchmarks' figures (scripts/bench/charts.py): a figure record survives its JSON,
each bar is as long as its value and a missing value draws none, a record that does not add up is
refused, and the charts the docs show are all there, each beside its record."""

from __future__ import annotations

import argparse
import doctest
import json
import re
import sys

import pytest

from scripts.bench import charts
from tests.helpers.paths import REPO, script

PAGES = (REPO / "docs" / "performance.md", REPO / "README.md")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.(?:png|svg))\)")
TABLE_HEADER = re.compile(r"^\|.*\|\n\|[-:| ]+\|$", re.MULTILINE)
WIDEST_TABLE = 6  # columns: wider tables run off the docs' page


def record(**changes) -> dict:
    base = {"title": "Training, MNIST", "unit": "rows/s", "groups": ["bernoulli", "multinomial", "gaussian"],
            "series": {"nbstream": [1_684_908, 2_188_827, 1_272_765], "scikit-learn": [50_184, None, 275_109]},
            "note": "python scripts/bench_core.py"}
    return {**base, **changes}


def bars(axis) -> dict[str, list]:
    """Each series' bars on ``axis`` by legend name: (start, end) of every bar, top to bottom."""
    return {container.get_label(): [(patch.get_x(), patch.get_x() + patch.get_width()) for patch in container]
            for container in axis.containers}


def test_a_record_survives_its_json(tmp_path):
    written = record(previous=["scikit-learn"], scale="log", reference=1)
    path = charts.write_record(written, tmp_path / "figures" / "training.json")
    assert charts.read_record(path) == written
    assert '"scikit-learn": [50184, null, 275109]' in path.read_text()  # a series reads as one line


def test_each_bar_is_as_long_as_its_value_and_a_missing_value_draws_none():
    figure = charts.figure(record())
    axis = figure.axes[0]
    drawn = bars(axis)
    assert drawn["nbstream"] == [(0, 1_684_908), (0, 2_188_827), (0, 1_272_765)]
    assert drawn["scikit-learn"] == [(0, 50_184), (0, 275_109)]  # no bar for multinomial's None
    assert [text.get_text() for text in axis.texts].count("n/a") == 1  # where the missing bar would be
    labels = [text.get_text() for text in axis.texts]
    assert "1.68 M" in labels and "50,184" in labels and "n/a" in labels
    assert [label.get_text() for label in axis.get_yticklabels()] == ["bernoulli", "multinomial", "gaussian"]
    assert axis.get_xscale() == "linear"  # 44 times from the least to the most: no log scale


def test_panels_share_the_groups_and_a_ratio_s_bars_start_at_its_baseline():
    figure = charts.figure({"title": "fit and predict", "groups": ["bernoulli", "gaussian"], "note": "bench",
                            "panels": [{"title": "fit", "unit": "s", "series": {"nbstream": [5.38, 9.07]}},
                                       {"title": "ratio", "unit": "x", "reference": 1, "scale": "log",
                                        "series": {"nbstream": [2.1, 0.35]}}]})
    fit, ratio = figure.axes
    assert bars(fit) == {"nbstream": [(0, 5.38), (0, 9.07)]}
    (start, end), (slower_start, slower_end) = bars(ratio)["nbstream"]
    assert (start, slower_start) == (1, 1) and (end, slower_end) == pytest.approx((2.1, 0.35))  # slower: leftwards
    assert ratio.get_xscale() == "log" and fit.get_xscale() == "linear"


def test_values_that_span_more_than_fifty_times_are_drawn_on_a_log_scale():
    wide = record(series={"nbstream": [3_636_553, 2_188_827, 1_272_765], "River": [658, 83_160, 21_737]})
    assert charts.figure(wide).axes[0].get_xscale() == "log"


def test_draw_writes_a_small_png_the_same_each_time(tmp_path):
    first = charts.draw(record(), tmp_path / "a.png")
    second = charts.draw(record(), tmp_path / "b.png")
    assert first.read_bytes().startswith(b"\x89PNG") and first.stat().st_size < 150_000
    assert first.read_bytes() == second.read_bytes()  # redrawn from the same record, the same file


@pytest.mark.parametrize(("changes", "message"), [
    ({"series": {"nbstream": [1, 2, 3], "scikit-learn": [1, 2]}}, "'scikit-learn' has 2 values for 3 groups"),
    ({"series": {"nbstream": [1, -2, 3]}}, "a value is a finite number >= 0, or None"),
    ({"series": {"nbstream": [1, True, 3]}}, "a value is a finite number >= 0, or None"),
    ({"series": {"nbstream": [1, float("nan"), 3]}}, "a value is a finite number >= 0, or None"),
    ({"series": {}}, "at least one series"),
    ({"groups": []}, "'groups' is a non-empty list"),
    ({"colour": "red"}, r"unknown \['colour'\]"),
    ({"previous": ["30b2f7d"]}, r"names \['30b2f7d'\], which are not among"),
    ({"scale": "cubic"}, "'scale' is 'log' or 'linear'"),
    ({"scale": "log", "series": {"nbstream": [0, 1, 2]}}, "a log scale cannot show a value of 0"),
    ({"panels": [{"unit": "s", "series": {"nbstream": [1, 2, 3]}}]}, "either 'unit' and 'series' or 'panels'"),
])
def test_a_record_that_does_not_add_up_is_refused(changes, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        charts.write_record(record(**changes), tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()


def test_without_matplotlib_a_chart_is_refused_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    with pytest.raises(SystemExit, match=re.escape("pip install 'nbstream[plots]'")):
        charts.draw(record(), tmp_path / "a.png")
    parser = argparse.ArgumentParser()
    charts.add_record_option(parser)
    with pytest.raises(SystemExit, match=re.escape("pip install 'nbstream[plots]'")):  # before the benchmark runs
        parser.parse_args(["--record", str(tmp_path)])


def test_record_option_places_the_record_and_its_chart(tmp_path):
    parser = argparse.ArgumentParser()
    charts.add_record_option(parser)
    given = parser.parse_args(["--record", str(tmp_path)]).record
    assert charts.record_file(given, "spark") == tmp_path / "spark.json"
    assert charts.record_file(tmp_path / "mine.json", "spark") == tmp_path / "mine.json"
    assert charts.image_path(tmp_path / "spark.json") == tmp_path / "spark.png"
    assert charts.image_path(charts.FIGURES / "spark.json") == charts.IMAGES / "spark.png"
    image = charts.publish(record(), tmp_path / "spark.json")
    assert image == tmp_path / "spark.png" and image.is_file() and (tmp_path / "spark.json").is_file()
    assert charts.command_line(["scripts/bench_spark.py", "--record=docs/figures", "--rounds", "3"]) == \
        "python scripts/bench_spark.py --rounds 3"


def test_the_examples_in_the_docstrings_hold():
    assert doctest.testmod(charts).failed == 0


def test_the_benchmarks_records_are_figure_records():
    """--record at the end of a long benchmark must not fail: each script's builder makes a valid record."""
    kafka, parquet, spark, core, prequential = (script(name) for name in ("bench_kafka", "bench_parquet", "bench_spark",
                                                                          "bench_core", "bench_prequential"))
    rates = {"kafka-python": 54_069.2, "kafka-python relay": 32_571.0, "confluent": 51_154.0, "relay": 49_448.0,
             "serve kafka-python": 20_708.0, "serve confluent": 48_750.0, "serve default": 48_006.0,
             "json": 36_463.0, "avro": 29_071.0, "json-schema": 38_537.0, "protobuf": 31_571.0}
    spark_times = {"fit": [11.37, 12.0], "predict": [1.27, 1.5]}, {"fit": [5.38, 6.1], "predict": [0.47, 0.5]}
    built = [kafka.throughput_record({"MNIST JSON (784 ints)": rates, "SMS text JSON": rates}),
             kafka.prequential_record({"MNIST JSON (784 ints)": (52_621.0, 52_122.0)}, REPO, 3),
             kafka.labels_record({"MNIST JSON, Bernoulli": (30_138.0, 27_912.0)}),
             kafka.challengers_record({0: (100_200.0, 342.0), 1: (92_421.0, 357.0), 3: (75_901.0, 363.0)}),
             kafka.registry_record({"MNIST, Bernoulli": rates}),
             kafka.partitions_record({(1, 1): (292.0, 147_666.0), (48, 3): (275.0, 48_279.0)}, REPO),
             parquet.figure_record([("MNIST 10x", 167_723.4, 51_776.0, 527.2, 1_589.0)], 5),
             spark.figure_record([("bernoulli", *spark_times)], "local[2]", 2)]
    race = core.Race(ours_train=0.02, sklearn_train=0.2, ours_predict=0.01, sklearn_predict=0.05, floor=0.012,
                     same_predictions=True)
    families = [core.FamilyRates("multinomial", race, 60_000, 10_000, None, None),
                core.FamilyRates("categorical", core.Race(1.0, 2.0, 0.05, 0.1, None, True), 60_000, 10_000, 9.0, 2.0)]
    built += [core.rates_record(families), core.floor_record(families)]
    timings = {("MNIST", "MultinomialNB"): prequential.Timing(5.6, 0.7, 200.0),
               ("MNIST", "ComplementNB"): prequential.Timing(4.9, 0.7, 180.0)}
    arguments = argparse.Namespace(baseline_root=REPO)
    built += [prequential.prequential_record(timings, None, arguments),
              prequential.prequential_record(timings, {("MNIST", "ComplementNB"): prequential.Timing(31.9, 0.7, 180)},
                                             arguments)]
    for made in built:
        charts.check(made)
        assert json.loads(json.dumps(made)) == made  # JSON as it is


def test_every_record_of_the_docs_has_its_chart_and_every_chart_its_record():
    records = sorted(charts.FIGURES.glob("*.json"))
    assert records, "docs/figures holds no figure record"
    for path in records:
        charts.read_record(path)  # a figure record
        assert charts.image_path(path).is_file(), f"{path.name} has no chart: python scripts/draw_charts.py"
    images = {path.stem for path in charts.IMAGES.iterdir()}
    assert images == {path.stem for path in records}, "a chart without its record in docs/figures"


def test_every_chart_the_docs_show_exists_and_every_chart_is_shown():
    shown = set()
    for page in PAGES:
        for target in IMAGE.findall(page.read_text()):
            image = (page.parent / target).resolve()
            assert image.is_file(), f"{page.name} shows {target}, which is not there"
            shown.add(image)
    assert {path.resolve() for path in charts.IMAGES.iterdir()} <= shown


def test_no_table_of_the_performance_pages_is_wider_than_the_page():
    for page in PAGES:
        for header in TABLE_HEADER.finditer(page.read_text()):
            columns = header[0].splitlines()[0].count("|") - 1
            assert columns <= WIDEST_TABLE, f"{page.name}: a table of {columns} columns: {header[0][:80]}"
