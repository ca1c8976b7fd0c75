"""The scikit-learn estimator protocol, without importing scikit-learn.

scikit-learn is not a dependency: the models only speak its protocol. Its classes are
used once the caller has loaded it (an ``except sklearn.exceptions.NotFittedError`` or a
``Pipeline`` implies it is loaded), so ``import nbstream`` stays fast without it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Self

if TYPE_CHECKING:  # scikit-learn is optional: its types only name what the protocol hands over
    from sklearn.utils import Tags
    from sklearn.utils.metadata_routing import MetadataRequest

_ROUTED_METHODS = ("fit", "partial_fit", "score")  # the methods that take sample_weight


class DataConversionWarning(UserWarning):
    """Input was converted to the expected shape (scikit-learn's warning, when it is loaded)."""


def data_conversion_warning() -> type[Warning]:
    """scikit-learn's DataConversionWarning when it is loaded, else nbstream's own."""
    exceptions = sys.modules.get("sklearn.exceptions")
    return exceptions.DataConversionWarning if exceptions is not None else DataConversionWarning


_NOT_FITTED_WITH_SKLEARN: dict[type[Exception], Callable[[str], Exception]] = {}


def not_fitted(error_class: type[Exception], message: str) -> Exception:
    """An instance of error_class that is also scikit-learn's NotFittedError when it is loaded."""
    exceptions = sys.modules.get("sklearn.exceptions")
    if exceptions is None:
        return error_class(message)
    both = _NOT_FITTED_WITH_SKLEARN.get(error_class)
    if both is None:
        both = type(error_class.__name__, (error_class, exceptions.NotFittedError),
                    {"__module__": error_class.__module__, "__doc__": error_class.__doc__,
                     "__reduce__": lambda error: (not_fitted, (error_class, str(error)))})  # picklable (joblib)
        _NOT_FITTED_WITH_SKLEARN[error_class] = both
    return both(message)


class EstimatorProtocol:
    """Tags and metadata routing, as scikit-learn's meta-estimators ask for them.

    The tags come from the model's ``_accept_sparse`` (CSR input) and ``requires_non_negative``
    (features are counts) and the two class attributes below; ``set_fit_request``,
    ``set_partial_fit_request`` and ``set_score_request`` record whether a meta-estimator
    (with ``sklearn.set_config(enable_metadata_routing=True)``) routes ``sample_weight``.
    """

    _accept_sparse: ClassVar[bool]
    requires_non_negative: ClassVar[bool]
    _categorical_input: ClassVar[bool] = False  # features are category codes
    _poor_score: ClassVar[bool] = False  # scikit-learn's generic score thresholds do not apply
    _metadata_request: MetadataRequest

    def __sklearn_tags__(self) -> Tags:
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        return Tags(estimator_type="classifier", target_tags=TargetTags(required=True),
                    classifier_tags=ClassifierTags(poor_score=self._poor_score),
                    input_tags=InputTags(sparse=self._accept_sparse, categorical=self._categorical_input,
                                         positive_only=self.requires_non_negative or self._categorical_input))

    def set_fit_request(self, *, sample_weight: bool | str | None = None) -> Self:
        """Whether a meta-estimator passes ``sample_weight`` to ``fit`` (True, False, None or an alias)."""
        return self._request("fit", sample_weight)

    def set_partial_fit_request(self, *, sample_weight: bool | str | None = None) -> Self:
        """Whether a meta-estimator passes ``sample_weight`` to ``partial_fit``."""
        return self._request("partial_fit", sample_weight)

    def set_score_request(self, *, sample_weight: bool | str | None = None) -> Self:
        """Whether a meta-estimator passes ``sample_weight`` to ``score``."""
        return self._request("score", sample_weight)

    def _request(self, method: str, sample_weight: bool | str | None) -> Self:
        routing = self.get_metadata_routing()
        getattr(routing, method).add_request(param="sample_weight", alias=sample_weight)
        self._metadata_request = routing  # the attribute scikit-learn's clone carries over
        return self

    def get_metadata_routing(self) -> MetadataRequest:
        """A ``sklearn.utils.metadata_routing.MetadataRequest`` for ``sample_weight``."""
        from sklearn.utils.metadata_routing import MetadataRequest, get_routing_for_object

        if hasattr(self, "_metadata_request"):
            return get_routing_for_object(self._metadata_request)  # a copy
        routing = MetadataRequest(owner=self)
        for method in _ROUTED_METHODS:
            getattr(routing, method).add_request(param="sample_weight", alias=None)
        return routing
