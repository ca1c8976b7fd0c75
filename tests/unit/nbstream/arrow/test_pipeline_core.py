"""The engine-neutral core: a pipeline learned from Arrow batches by the shared row rules, to bytes
and back, merged in memory with category codes aligned; and confusion counts summed across shards."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import confusion_matrix

import nbstream
from nbstream.arrow import FeatureSpec, Pipeline, PipelineLearner, UnusableRow, load_pipeline
from nbstream.metrics.classification import ConfusionCounts


def pipeline(spec: FeatureSpec, model=None, label="label") -> Pipeline:
    return Pipeline(model or nbstream.MultinomialNB(), spec.encoder(), label=label)


def learned(spec: FeatureSpec, batches, model_kind="multinomial", **options) -> Pipeline:
    result = pipeline(spec, nbstream.model_class(model_kind)())
    learner = PipelineLearner(result, **options)
    for batch in batches:
        learner.learn(batch)
    return result


COLOURS = pa.record_batch({"colour": ["red", "blue", "red", "green", "blue", "cyan"],
                           "size": ["s", "l", "s", "m", "l", "s"], "label": ["y", "n", "y", "n", "n", "y"]})


# ---- learning --------------------------------------------------------------------------------------
def test_a_bad_row_stops_the_learning_with_its_row_column_and_reason_and_nothing_of_the_batch_is_learned():
    learner = PipelineLearner(pipeline(FeatureSpec.numeric_columns(["x"])))
    with pytest.raises(UnusableRow) as refused:
        learner.learn(pa.record_batch({"x": [1, 2, 3], "label": ["a", None, "b"]}))
    assert (refused.value.row, refused.value.column, refused.value.reason) == (1, "label", "null label")
    assert str(refused.value) == "row 1, column 'label': null label"
    assert not learner.pipeline.model.is_fitted


def test_skip_invalid_learns_the_good_rows_and_returns_the_bad_ones():
    learner = PipelineLearner(pipeline(FeatureSpec.numeric_columns(["x"])), skip_invalid=True, max_classes=2)
    problems = learner.learn(pa.record_batch({"x": [1, -2, 3, 4, 5], "label": ["a", "a", "b", "c", "a"]}))
    assert list(problems) == [(1, "x", "negative value (this model needs counts)"),
                              (3, "label", "label would add a class beyond --max-classes 2")]
    model = learner.pipeline.model
    assert model.classes_.tolist() == ["a", "b"] and model.class_count_.tolist() == [2, 1]


def test_the_schema_check_names_the_source_and_the_missing_label():
    learner = PipelineLearner(pipeline(FeatureSpec.numeric_columns(["x"])))
    with pytest.raises(nbstream.arrow.FeatureError, match=r"^part-3: label column 'label' not found; columns are"):
        learner.check_schema(pa.schema([("x", pa.int64())]), "part-3")
    assert learner.columns == ["x", "label"]


def test_a_pipeline_without_a_label_column_cannot_learn():
    with pytest.raises(ValueError, match="names no label column"):
        PipelineLearner(pipeline(FeatureSpec.numeric_columns(["x"]), label=None))


# ---- bytes and files -------------------------------------------------------------------------------
def test_a_fitted_pipeline_goes_to_snapshot_bytes_and_back_with_its_label_and_metadata():
    original = learned(FeatureSpec.categorical(["colour", "size"]), [COLOURS], "categorical")
    original.meta["source"] = nbstream.arrow.files_source(["/data/a.parquet"])
    data = original.to_bytes()
    assert data.startswith(b"NBSNAP")
    back = Pipeline.from_bytes(data)
    assert (back.label, back.meta) == ("label", {"source": {"type": "files", "files": ["/data/a.parquet"]}})
    assert back.features.to_json() == original.features.to_json()
    np.testing.assert_array_equal(back.predict_proba(COLOURS), original.predict_proba(COLOURS))


def test_a_pipeline_that_learned_nothing_keeps_its_parameters_and_what_its_encoder_learned():
    empty = pipeline(FeatureSpec.categorical(["colour"]), nbstream.CategoricalNB(alpha=0.5, min_categories=3))
    PipelineLearner(empty, skip_invalid=True).learn(pa.record_batch({"colour": ["red"], "label": pa.array([None],
                                                                                                            pa.string())}))
    back = Pipeline.from_bytes(empty.to_bytes())
    assert not back.model.is_fitted and repr(back.model) == "CategoricalNB(alpha=0.5, min_categories=3)"
    assert back.features.categories == [{"red": 0}] and back.label == "label"
    with pytest.raises(ValueError, match="learned nothing"):
        empty.save("never.nbs")


@pytest.mark.parametrize("data", [b"NBPIPE\x00\x01{", b"NBPIPE\x00\x01" + b'{"kind": "nope", "params": {}}',
                                  b"NBPIPE\x00\x01" + b'{"kind": "multinomial", "params": {"alpha": -1}, "meta": {}}',
                                  b"neither"])
def test_bytes_that_are_no_pipeline_are_a_snapshot_error(data):
    with pytest.raises(nbstream.SnapshotError, match="^shard 3: "):
        Pipeline.from_bytes(data, "shard 3")


def test_save_writes_a_snapshot_that_load_pipeline_reads(tmp_path):
    original = learned(FeatureSpec.numeric_columns(["x"]), [pa.record_batch({"x": [1, 0], "label": [3, 4]})])
    original.save(tmp_path / "m.nbs")
    back = load_pipeline(tmp_path / "m.nbs")
    assert back.label == "label" and back.classes_.tolist() == [3, 4]
    np.testing.assert_array_equal(back.model.feature_count_, original.model.feature_count_)


# ---- merging -------------------------------------------------------------------------------------------
def test_merging_shards_equals_learning_every_row_with_category_codes_aligned():
    spec = FeatureSpec.categorical(["colour", "size"])
    whole = learned(spec, [COLOURS], "categorical")
    first, second = (learned(spec, [part], "categorical") for part in (COLOURS.slice(0, 3), COLOURS.slice(3)))
    second_before = ([counts.copy() for counts in second.model.category_count_], second.features.to_json())
    merged = first.merge(second)
    assert merged.features.to_json() == whole.features.to_json()
    assert merged.classes_.tolist() == whole.classes_.tolist()
    for mine, theirs in zip(merged.model.category_count_, whole.model.category_count_, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    assert second.features.to_json() == second_before[1]  # the other pipeline is left as it was
    for after, before in zip(second.model.category_count_, second_before[0], strict=True):
        np.testing.assert_array_equal(after, before)


def test_a_shard_that_learned_nothing_merges_as_a_normal_case():
    spec = FeatureSpec.vector("v")
    fitted = learned(spec, [pa.record_batch({"v": [[1, 2], [0, 1]], "label": ["a", "b"]})])
    empty = pipeline(spec)
    assert empty.merge(fitted) is empty and empty.features.n_features == 2
    assert empty.model.class_count_.tolist() == [1, 1]
    assert fitted.merge(pipeline(spec)).model.class_count_.tolist() == [1, 1]


@pytest.mark.parametrize(("other", "message"), [
    (Pipeline(nbstream.BernoulliNB(), FeatureSpec.numeric_columns(["x"]).encoder()), "of different kinds"),
    (Pipeline(nbstream.MultinomialNB(alpha=2.0), FeatureSpec.numeric_columns(["x"]).encoder()),
     r"parameters differ: \['alpha'\]"),
    (Pipeline(nbstream.MultinomialNB(), FeatureSpec.numeric_columns(["y"]).encoder()), "the features differ")])
def test_pipelines_that_cannot_merge_are_refused_unchanged(other, message):
    mine = learned(FeatureSpec.numeric_columns(["x"]), [pa.record_batch({"x": [1], "label": ["a"]})])
    with pytest.raises(ValueError, match=message):
        mine.merge(other)
    assert mine.model.class_count_.tolist() == [1]


# ---- confusion counts across shards --------------------------------------------------------------------
def test_confusion_counts_of_shards_add_up_to_those_of_all_rows_through_json():
    rng = np.random.default_rng(1)
    classes = np.array([5, 0, 4])
    y = rng.choice([5, 0, 4, 9], size=300)
    proba = rng.dirichlet(np.ones(3), size=300)
    whole = ConfusionCounts(classes)
    whole.add(y, proba)
    shards = [ConfusionCounts(classes) for _ in range(3)]
    for shard, rows in zip(shards, np.array_split(np.arange(300), 3), strict=True):
        shard.add(y[rows][::-1], proba[rows][::-1])  # other orders of first appearance
    total = ConfusionCounts(classes)
    for shard in shards:
        total.merge(ConfusionCounts.from_json(shard.to_json()))
    report, expected = total.report(), whole.report()
    assert report["confusion_matrix"] == expected["confusion_matrix"]
    assert report["labels"] == [0, 4, 5, 9]
    np.testing.assert_array_equal(report["confusion_matrix"],
                                  confusion_matrix(y, classes[proba.argmax(axis=1)], labels=[0, 4, 5, 9])[:, :3])
    assert report["log_loss"] == pytest.approx(expected["log_loss"], rel=1e-12)
    with pytest.raises(ValueError, match="other classes"):
        total.merge(ConfusionCounts(np.array([0, 4, 5])))
