"""What every drift detector is: ``DriftDetector`` (update, detections counted, its state as
plain JSON), and the checks of parameters, values and state fields the detectors share."""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Self

from ..utils.checked import as_number, integer, required, shown

# The largest magnitude a detector takes: the sums of squared deviations of any stream of such
# values stay far from float64's overflow, and every state stays finite JSON.

LARGEST_DRIFT_VALUE = 1e100
_C_INT_MAX = (1 << 31) - 1  # River keeps the integer parameters as C ints
_COUNT_MAX = (1 << 63) - 1  # counts of values and of detections: int64


class DriftDetector(abc.ABC):
    """What every detector offers: ``update`` one value at a time, the flag of the last update,
    the count of detections, and a plain JSON state (``to_state`` / ``from_state``)."""

    kind: ClassVar[str]  # the name in a state and in ``drift_detector``
    parameters: ClassVar[tuple[str, ...]]  # the constructor's, kept as attributes of these names
    kinds: ClassVar[dict[str, type[DriftDetector]]] = {}  # every detector by its kind, as each is defined

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            DriftDetector.kinds[cls.kind] = cls

    def __init__(self) -> None:
        self._drift_detected = False
        self._n_detections = 0

    def update(self, x: float) -> bool:
        """Learn one value (finite, at most ``LARGEST_DRIFT_VALUE`` in magnitude); True when a drift is
        detected at it. The value after a detection starts the detector afresh, as River's do."""
        value = _checked_value(x)
        if self._drift_detected:
            self._restart()
        detected = self._drift_detected = self._learn(value)
        if detected:
            self._n_detections += 1
        return detected

    @property
    def drift_detected(self) -> bool:
        """Whether the last update detected a drift."""
        return self._drift_detected

    @property
    def n_detections(self) -> int:
        """The drifts detected since the detector was made (restored states included)."""
        return self._n_detections

    def params(self) -> dict[str, Any]:
        """The constructor's parameters by name."""
        return {name: getattr(self, name) for name in self.parameters}

    @abc.abstractmethod
    def _restart(self) -> None:
        """Forget the values learned so far (not the parameters, not ``n_detections``)."""

    @abc.abstractmethod
    def _learn(self, value: float) -> bool:
        """Learn a checked value; True when it shows a drift."""

    @abc.abstractmethod
    def _stream_state(self) -> dict[str, Any]:
        """What the detector learned from the values since its last restart, as plain JSON."""

    @abc.abstractmethod
    def _restore_stream_state(self, state: dict[str, object]) -> None:
        """Take back what ``_stream_state`` gave, checking every field (ValueError)."""

    def to_state(self) -> dict[str, Any]:
        """The detector as plain JSON values (str, bool, int, float, lists and objects of them)."""
        return {"kind": self.kind, "params": self.params(), "drift_detected": self._drift_detected,
                "n_detections": self._n_detections, **self._stream_state()}

    @classmethod
    def from_state(cls, state: object) -> Self:
        """The detector a ``to_state`` describes (on ``DriftDetector``: of whichever kind it names).
        A state that is not one a detector can write is refused with one ValueError line."""
        if not isinstance(state, dict):
            raise ValueError(f"a drift detector state must be a JSON object; got {shown(state)}")
        kind = _field(state, "kind")
        kinds = DriftDetector.kinds
        if not isinstance(kind, str) or kind not in kinds:
            raise ValueError(f"drift detector state: kind must be one of {', '.join(kinds)}; got {shown(kind)}")
        detector_type = kinds[kind]
        if not issubclass(detector_type, cls):
            raise ValueError(f"drift detector state: a {kind} state is no {cls.kind} state")
        if detector_type is not cls:
            return detector_type.from_state(state)
        detector = cls(**_checked_params(cls, _field(state, "params")))
        drift_detected = _field(state, "drift_detected")
        if not isinstance(drift_detected, bool):
            raise ValueError(f"drift detector state: drift_detected must be true or false; "
                             f"got {shown(drift_detected)}")
        detector._drift_detected = drift_detected
        detector._n_detections = integer(_field(state, "n_detections"), "n_detections", 0, _COUNT_MAX)
        detector._restore_stream_state(state)
        return detector

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{name}={value!r}' for name, value in self.params().items())})"



# The checks of parameters and of state fields: each passes a good value on (as a plain int or
# float) and raises a one-line ValueError naming the field for a bad one.

def _checked_params(detector_type: type[DriftDetector], params: object) -> dict[str, Any]:
    """params when it is a dict whose keys are all parameters of detector_type (their values are
    the constructor's to check)."""
    if not isinstance(params, dict):
        raise ValueError(f"{detector_type.kind} parameters must be a JSON object; got {shown(params)}")
    unknown = [shown(name) for name in params if name not in detector_type.parameters]
    if unknown:
        raise ValueError(f"{detector_type.kind} has no parameter {', '.join(unknown[:3])}; its parameters are "
                         f"{', '.join(detector_type.parameters)}")
    return params


def _checked_value(x: object, name: str = "drift detector value") -> float:
    """x as a float when it is a real number of magnitude at most LARGEST_DRIFT_VALUE."""
    value = x if type(x) is float else as_number(x)
    if value is None:
        raise ValueError(f"{name} must be a number; got {shown(x)}")
    if not -LARGEST_DRIFT_VALUE <= value <= LARGEST_DRIFT_VALUE:
        raise ValueError(f"{name} must be finite and at most {LARGEST_DRIFT_VALUE:g} in magnitude; got {shown(x)}")
    return value


def _field(state: dict[str, object], key: str) -> object:
    return required(state, key, "drift detector state: ")
