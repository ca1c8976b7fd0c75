"""Arrow record batches to model input: feature specs, their encoders, labels and row problems.

Needs pyarrow (``pip install nbstream[arrow]``); the estimators themselves do not.

>>> import pyarrow as pa
>>> encoder = FeatureSpec.categorical(["colour"]).encoder()
>>> X, problems = encoder.encode(pa.record_batch({"colour": ["red", "blue", "red"]}), learn=True)
>>> X[:, 0].tolist(), encoder.categories
([0, 1, 0], [{'red': 0, 'blue': 1}])
"""

from .categorical import UNSEEN_CATEGORY, CategoricalEncoder
from .labels import extract_labels, flag_classes_beyond, label_values
from .learning import KeyedPipelineLearner, PipelineLearner, UnusableRow
from .numeric import NumericColumnsEncoder, VectorEncoder
from .pipeline import Pipeline, PipelineExplanations, feature_encoder_of, files_source, load_pipeline
from .problems import FeatureError, RowProblems
from .spec import LONGEST_NGRAMS, FeatureEncoder, FeatureSpec
from .text import TextEncoder

__all__ = ["LONGEST_NGRAMS", "CategoricalEncoder", "FeatureEncoder", "FeatureError", "FeatureSpec",
           "KeyedPipelineLearner", "NumericColumnsEncoder", "Pipeline", "PipelineExplanations", "PipelineLearner",
           "RowProblems", "TextEncoder",
           "UNSEEN_CATEGORY", "UnusableRow", "VectorEncoder", "extract_labels", "feature_encoder_of",
           "files_source", "flag_classes_beyond", "label_values", "load_pipeline"]
