"""nbstream: streaming Naive Bayes with mergeable statistics and safe snapshots.

The five models follow scikit-learn's ``naive_bayes`` (same parameters, attributes and
numbers) and add what a stream needs: an open class set, ``merge``, forgetting
(``half_life``), lazy refresh of the smoothed tables, ``save``/``load`` (``dumps``/``loads`` for
bytes), the learned state as plain values (``export_state``, ``from_state``, ``ModelState``), and
each prediction explained by its features (``explain``, ``Explanations``); a model per key backed off to
the group's (``KeyedNB``).

Models leave nbstream as scikit-learn estimators (``to_sklearn``, and ``from_sklearn`` back), ONNX
graphs (``nbstream.onnx``) and MLflow models (``nbstream.mlflow``).
"""

from .interop.sklearn import from_sklearn, to_sklearn
from .naive_bayes.bernoulli import BernoulliNB
from .naive_bayes.categorical import CategoricalNB
from .naive_bayes.complement import ComplementNB
from .naive_bayes.explanations import Explanations
from .naive_bayes.gaussian import GaussianNB
from .naive_bayes.keyed import KeyedNB
from .naive_bayes.kinds import MODEL_KINDS, model_class
from .naive_bayes.multinomial import MultinomialNB
from .naive_bayes.state import ModelState
from .persistence.snapshot import SnapshotError, dumps, load, load_keyed, loads, loads_keyed, save
from .stats.counts import TableSizeError
from .utils.class_set import LabelError, LabelTypeError
from .utils.validation import NotFittedError

__all__ = ["BernoulliNB", "CategoricalNB", "ComplementNB", "Explanations", "GaussianNB", "KeyedNB", "MultinomialNB",
           "MODEL_KINDS", "LabelError", "LabelTypeError", "ModelState", "NotFittedError", "SnapshotError",
           "TableSizeError", "dumps", "load", "load_keyed", "loads", "loads_keyed", "from_sklearn", "model_class",
           "save", "to_sklearn"]
__version__ = "0.1.0"
