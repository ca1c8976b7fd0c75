"""Feature specs and their encoders: Arrow batches to model input, with row problems named."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import CountVectorizer

from nbstream.arrow import UNSEEN_CATEGORY, FeatureEncoder, FeatureError, FeatureSpec, RowProblems, extract_labels
from nbstream.arrow.hashing import hash_tokens, hashed_counts


def test_fixed_size_lists_are_read_without_copying_or_converting():
    pixels = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12, dtype=np.uint8)), 4)
    X, problems = FeatureSpec.vector("px").encoder().encode(pa.record_batch({"px": pixels}), learn=True)
    assert X.dtype == np.uint8 and X.shape == (3, 4)
    assert X[2].tolist() == [8, 9, 10, 11]
    assert not problems.any()


def test_ragged_lists_nulls_and_nan_are_flagged_per_row():
    values = pa.array([[1.0, 2.0], [3.0], None, [np.nan, 1.0], [4.0, None], [5.0, 6.0]], pa.list_(pa.float64()))
    encoder = FeatureSpec.vector("v").encoder()
    X, problems = encoder.encode(pa.record_batch({"v": values}), learn=True)
    assert encoder.n_features == 2
    assert problems.bad.tolist() == [False, True, True, True, True, False]
    assert problems.message[1] == "list has 1 values; expected 2"
    assert problems.message[2] == "null value"
    assert problems.message[3] == "NaN or infinite value"
    assert problems.message[4] == "null inside the list"
    assert X[5].tolist() == [5.0, 6.0]


def test_negative_counts_are_flagged_for_count_models():
    batch = pa.record_batch({"a": pa.array([1, -1, 2]), "b": pa.array([0, 0, 3])})
    _, problems = FeatureSpec.numeric_columns(["a", "b"]).encoder().encode(batch, learn=True, counts_only=True)
    assert problems.bad.tolist() == [False, True, False]
    assert problems.column[1] == "a"


def test_schema_errors_name_the_file_and_column():
    schema = pa.schema([("text", pa.int64()), ("label", pa.string())])
    with pytest.raises(FeatureError, match=r"data.parquet: column 'body' not found"):
        FeatureSpec.text("body").encoder().check_schema(schema, "data.parquet")
    with pytest.raises(FeatureError, match=r"column 'text' has type int64; expected a string column"):
        FeatureSpec.text("text").encoder().check_schema(schema, "data.parquet")


def test_categories_keep_stable_codes_and_unseen_values_get_the_unseen_code():
    encoder = FeatureSpec.categorical(["colour"]).encoder()
    first, _ = encoder.encode(pa.record_batch({"colour": ["red", "blue", "red"]}), learn=True)
    second, _ = encoder.encode(pa.record_batch({"colour": ["green", "blue"]}), learn=True)
    assert first[:, 0].tolist() == [0, 1, 0] and second[:, 0].tolist() == [2, 1]
    predicted, _ = encoder.encode(pa.record_batch({"colour": ["purple", "red"]}), learn=False)
    assert predicted[:, 0].tolist() == [UNSEEN_CATEGORY, 0]
    restored = FeatureEncoder.from_json(encoder.to_json())
    assert restored.categories == [{"red": 0, "blue": 1, "green": 2}]


def test_labels_nulls_are_flagged():
    problems = RowProblems(3)
    y = extract_labels(pa.record_batch({"y": pa.array(["a", None, "b"])}), "y", problems)
    assert y.tolist() == ["a", "", "b"] and problems.message[1] == "null label"


def test_text_tokens_match_scikit_learns_default_analyzer():
    texts = ["Free entry in 2 a wkly comp!!", "Héllo wörld, hello again_x", "", "a b c", "Spam spam SPAM!"]
    ours = hashed_counts(pa.array(texts), n_bits=20)
    theirs = CountVectorizer().fit_transform(texts)
    np.testing.assert_array_equal(np.asarray(ours.sum(axis=1)).ravel(), np.asarray(theirs.sum(axis=1)).ravel())
    assert ours[1].nnz == 4  # "héllo" and "hello" are two tokens, as in scikit-learn
    assert ours[4].max() == 3


def test_hashes_are_stable_and_ngrams_count_neighbours_within_a_row():
    a = hash_tokens(pa.array(["spam", "ham"]))
    b = hash_tokens(pa.array(["x", "ham", "spam"]).slice(1))
    assert a.tolist() == b[::-1].tolist()
    bigrams = hashed_counts(pa.array(["one two three", "four five"]), n_bits=16, ngram_max=2)
    assert np.asarray(bigrams.sum(axis=1)).ravel().tolist() == [5, 3]  # 3 + 2 and 2 + 1


def _reference_hash(token: bytes) -> int:
    """HASH_SCHEME by its definition: a polynomial over the bytes + 1, then splitmix64."""
    mask, h = (1 << 64) - 1, 0
    for byte in token:
        h = (h * 0x100000001B3 + byte + 1) & mask
    for shift, multiplier in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        h = ((h ^ (h >> shift)) * multiplier) & mask
    return h ^ (h >> 31)


def test_token_hashes_are_the_hash_scheme_s_and_never_change():
    pinned = {"spam": 0x52CEDFD0623A700C, "ham": 0x74DBBB693E199B10, "héllo": 0xBEF4E8DB75760C61,
              "a" * 100: 0x71187CEA98CFF286}  # models saved since poly31-splitmix64-v1 depend on these
    assert hash_tokens(pa.array(list(pinned))).tolist() == list(pinned.values())
    rng = np.random.default_rng(3)
    tokens = ["".join(rng.choice(list("abcé中_9"), size=rng.integers(1, 40))) for _ in range(300)]
    tokens += ["x" * 70_000, "y" * 5]  # beyond the first power tables, then after them
    assert hash_tokens(pa.array(tokens)).tolist() == [_reference_hash(t.encode()) for t in tokens]


def test_text_spec_validates_its_settings():
    with pytest.raises(ValueError, match="hash_bits must be between 1 and 31"):
        FeatureSpec.text("t", hash_bits=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet=st.sampled_from("aZ_09 ,.!\t\nÉéß€-İΣς中文\u0301😀٣\u00ad"),
                                               max_size=30),
                          st.text(max_size=20)), max_size=25))
def test_the_numpy_tokenizer_gives_the_regex_tokenizers_tokens(texts):
    from nbstream.arrow.hashing import token_hashes, tokenize

    array = pa.array(texts, pa.string())
    tokens, rows = tokenize(array)
    hashes, token_rows = token_hashes(array)
    np.testing.assert_array_equal(token_rows, rows)
    np.testing.assert_array_equal(hashes, hash_tokens(tokens))


def test_every_code_point_is_tokenized_as_the_regex_tokenizer_does():
    from nbstream.arrow.hashing import token_hashes, tokenize

    points = [c for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000]
    array = pa.array([f"xa{chr(c)}bx{chr(c)} {chr(c)}{chr(c)}" for c in points])  # inside, alone, doubled
    tokens, rows = tokenize(array)
    hashes, token_rows = token_hashes(array)
    np.testing.assert_array_equal(token_rows, rows)
    np.testing.assert_array_equal(hashes, hash_tokens(tokens))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 1.0, 255.0, -1.0, -0.0, np.nan, np.inf, -np.inf, 1e300, -1e300, 5e-324]),
                         min_size=3, max_size=3), min_size=1, max_size=8),
       st.booleans())
def test_each_row_gets_the_first_rule_it_breaks(rows, counts_only):
    from nbstream.arrow.problems import RowProblems, flag_values
    from nbstream.utils.validation import LARGEST_VALUE

    X = np.array(rows)
    problems = RowProblems(len(X))
    flag_values(X, "features", counts_only, problems)
    for row, message in zip(X, problems.message, strict=True):
        if not np.isfinite(row).all():
            assert message == "NaN or infinite value"
        elif (np.abs(row) > LARGEST_VALUE).any():
            assert message.startswith("value beyond")
        elif counts_only and (row < 0).any():
            assert message.startswith("negative value")
        else:
            assert message is None or message == ""


@pytest.mark.parametrize("stored, message", [
    ({"kind": "categorical", "columns": ["a", "b"], "categories": [["x", "y"]]}, "one list of strings for each"),
    ({"kind": "categorical", "columns": ["a"]}, "one list of strings for each"),
    ({"kind": "categorical", "columns": ["a"], "categories": [[1, 2]]}, "one list of strings for each"),
    ({"kind": "vector", "columns": ["v"], "n_features": -3}, "positive integer"),
    ({"kind": "vector", "columns": ["v"], "n_features": 2.5}, "positive integer"),
])
def test_a_stored_encoder_state_that_does_not_fit_its_columns_is_refused(stored, message):
    """Categories for fewer columns than the spec names would leave a column unencoded."""
    with pytest.raises(FeatureError, match=message):
        FeatureEncoder.from_json(stored)


@pytest.mark.parametrize("settings, message", [
    ({"hash_bits": 20.5}, "hash_bits"), ({"hash_bits": True}, "hash_bits"), ({"ngram_max": 2.0}, "ngram_max"),
])
def test_text_settings_must_be_integers(settings, message):
    with pytest.raises(ValueError, match=message):
        FeatureSpec.text("t", **settings)
    with pytest.raises(ValueError, match="named by strings"):
        FeatureSpec.categorical(["a", 7])


@pytest.mark.parametrize("ngram_max", [3, 4, 5, 10**9])
def test_ngrams_longer_than_the_batch_s_tokens_are_none_and_cost_nothing(ngram_max):
    """A batch of three tokens with up to 5-grams (the worker's --ngrams 5) broke a shape."""
    import time

    started = time.perf_counter()
    counts = hashed_counts(pa.array(["one two three"]), n_bits=8, ngram_max=ngram_max)
    assert time.perf_counter() - started < 5
    assert counts.sum() == 6  # three words, two bigrams, one trigram
