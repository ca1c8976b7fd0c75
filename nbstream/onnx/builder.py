"""A small ONNX graph builder: constants, nodes of the standard operator set, and the model around them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ndarrays import AnyArray
from ..optional import optional_module

# Operator set 17 and IR version 8 (ONNX 1.12, 2022): read by every ONNX Runtime since 1.12 and by
# the other runtimes of that age; every operator used here is in this set's default domain.
OPSET = 17
IR_VERSION = 8


def onnx_module() -> Any:
    """The ``onnx`` package (MissingDependency naming ``nbstream[onnx]`` when it is not installed)."""
    return optional_module("onnx", "onnx")


class GraphBuilder:
    """Nodes and constants of one graph whose floating values are all of one dtype.

    dtype : float64 or float32: the input's, every float constant's and so every float operation's
    """

    def __init__(self, dtype: np.dtype[Any]):
        self.onnx = onnx_module()
        self.dtype = dtype
        self.float_type = self.onnx.helper.np_dtype_to_tensor_dtype(dtype)
        self.nodes: list[Any] = []
        self.constants: list[Any] = []
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def floats(self, values: AnyArray | float, hint: str) -> str:
        """A constant of float values, in the graph's dtype."""
        return self._constant(np.asarray(values, dtype=self.dtype), hint)

    def integers(self, values: AnyArray | Sequence[int] | int, hint: str) -> str:
        """A constant of int64 values."""
        return self._constant(np.asarray(values, dtype=np.int64), hint)

    def labels(self, classes: AnyArray, hint: str) -> str:
        """The class labels as a constant: int64, double, bool or string, as ``label_type`` says."""
        kind = self.label_type(classes)
        if kind == self.onnx.TensorProto.STRING:
            tensor = self.onnx.helper.make_tensor(self._name(hint), kind, [len(classes)],
                                                  [str(label).encode() for label in classes.tolist()])
            self.constants.append(tensor)
            return str(tensor.name)
        numeric = {self.onnx.TensorProto.INT64: np.int64, self.onnx.TensorProto.DOUBLE: np.float64,
                   self.onnx.TensorProto.BOOL: np.bool_}[kind]
        return self._constant(np.asarray(classes, dtype=numeric), hint)

    def label_type(self, classes: AnyArray) -> int:
        """The ONNX element type of the labels: int64 for integers, double for floats, bool, string for
        strings (ValueError for labels of mixed or other types)."""
        tensor_proto = self.onnx.TensorProto
        values = classes.tolist()
        if all(isinstance(v, str) for v in values):
            return int(tensor_proto.STRING)
        if all(isinstance(v, bool) for v in values):
            return int(tensor_proto.BOOL)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return int(tensor_proto.INT64)
        if all(isinstance(v, float) for v in values):
            return int(tensor_proto.DOUBLE)
        raise ValueError(f"ONNX labels are strings, integers, floats or booleans, all of one type; got "
                         f"{sorted({type(v).__name__ for v in values})}.")

    def _constant(self, array: AnyArray, hint: str) -> str:
        tensor = self.onnx.numpy_helper.from_array(array, self._name(hint))
        self.constants.append(tensor)
        return str(tensor.name)

    def add(self, op: str, *inputs: str, name: str | None = None, **attributes: Any) -> str:
        """A node of the standard operator set; returns its (single) output's name."""
        output = name or self._name(op.lower())
        self.nodes.append(self.onnx.helper.make_node(op, list(inputs), [output], **attributes))
        return output

    def model(self, n_features: int, outputs: Sequence[tuple[str, int, list[Any]]], *, input_name: str,
              doc: str, metadata: dict[str, str]) -> Any:
        """The checked ``onnx.ModelProto``: one input (n_rows, n_features) of the graph's dtype, and
        ``outputs`` as (name, element type, shape) of nodes already added."""
        helper = self.onnx.helper
        graph = helper.make_graph(
            self.nodes, "nbstream", [helper.make_tensor_value_info(input_name, self.float_type, ["N", n_features])],
            [helper.make_tensor_value_info(name, kind, shape) for name, kind, shape in outputs],
            initializer=self.constants)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                                  producer_name="nbstream", doc_string=doc)
        helper.set_model_props(model, metadata)
        self.onnx.checker.check_model(model, full_check=True)
        return model
