"""A small ONNX graph builder: constants, nodes of the standard operator set, and the model around them.

A large constant (a table of n_features x n_classes) is not copied into the graph's protobuf: it is
kept as a function that gives its rows, and ``Graph.write`` writes its bytes to the file a block
of rows at a time, after the rest of the model, as one more ``graph`` field of the ModelProto
holding that initializer (protobuf parsers merge the two, as the format specifies). So writing a
model holds its tables once, as the estimator does, and never a copy of them.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from ..utils.ndarrays import AnyArray
from ..utils.optional import optional_module

# Operator set 17 and IR version 8 (ONNX 1.12, 2022): read by every ONNX Runtime since 1.12 and by
# the other runtimes of that age; every operator used here is in this set's default domain.
OPSET = 17
IR_VERSION = 8
DEFERRED_BYTES = 1 << 20  # a float constant of this many bytes and more is written from its rows
_BLOCK_BYTES = 1 << 22  # bytes of rows converted and written at a time


@dataclass(frozen=True)
class Deferred:
    """A large 2-D float constant: its name, shape, and ``rows(slice)``, the rows of that slice in
    any float dtype (cast to the graph's a block at a time)."""
    name: str
    shape: tuple[int, int]
    rows: Callable[[slice], AnyArray]


@dataclass(frozen=True)
class Graph:
    """A checked model: ``proto`` holds all but the ``deferred`` constants, which ``write`` adds."""
    proto: Any
    deferred: tuple[Deferred, ...]
    dtype: np.dtype[Any]

    def write(self, out: IO[bytes]) -> None:
        """The model's bytes, to ``out``: the protobuf, then each deferred constant as an
        initializer of a further ``graph`` field, written a block of rows at a time."""
        onnx = onnx_module()
        out.write(self.proto.SerializeToString())
        itemsize = self.dtype.itemsize
        for constant in self.deferred:
            n_rows, n_columns = constant.shape
            head = onnx.TensorProto(name=constant.name, dims=list(constant.shape),
                                    data_type=onnx.helper.np_dtype_to_tensor_dtype(self.dtype)).SerializeToString()
            raw = n_rows * n_columns * itemsize
            tensor = len(head) + 1 + len(_varint(raw)) + raw
            initializer = 1 + len(_varint(tensor)) + tensor
            out.write(_field(_MODEL_GRAPH) + _varint(initializer) + _field(_GRAPH_INITIALIZER) + _varint(tensor)
                      + head + _field(_TENSOR_RAW_DATA) + _varint(raw))
            step = max(1, _BLOCK_BYTES // max(1, n_columns * itemsize))
            for start in range(0, n_rows, step):
                block = np.ascontiguousarray(constant.rows(slice(start, min(start + step, n_rows))),
                                             dtype=self.dtype.newbyteorder("<"))
                out.write(block.reshape(-1).view(np.uint8).data)

    def to_proto(self) -> Any:
        """The whole ``onnx.ModelProto``, deferred constants included (what ``write`` writes, read back)."""
        buffer = io.BytesIO()
        self.write(buffer)
        return onnx_module().load_model_from_string(buffer.getvalue())


# Field numbers of onnx.proto: ModelProto.graph, GraphProto.initializer, TensorProto.raw_data.
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW_DATA = 7, 5, 9


def _field(number: int) -> bytes:
    """The key of a length-delimited field."""
    return _varint(number << 3 | 2)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | 0x80 if value else byte)
        if not value:
            return bytes(out)


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
        self.deferred: list[Deferred] = []
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def floats(self, values: AnyArray | float, hint: str) -> str:
        """A constant of float values, in the graph's dtype (a large table is deferred: not copied)."""
        array = np.asarray(values)
        if array.ndim == 2 and array.size * self.dtype.itemsize >= DEFERRED_BYTES:
            return self.rows(array.shape, array.__getitem__, hint)
        return self._constant(np.asarray(array, dtype=self.dtype), hint)

    def rows(self, shape: tuple[int, int], rows: Callable[[slice], AnyArray], hint: str) -> str:
        """A 2-D float constant of ``shape`` given by its rows (``Deferred``), written from them."""
        name = self._name(hint)
        self.deferred.append(Deferred(name, (int(shape[0]), int(shape[1])), rows))
        return name

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
              doc: str, metadata: dict[str, str]) -> Graph:
        """The checked model: one input (n_rows, n_features) of the graph's dtype, and ``outputs`` as
        (name, element type, shape) of nodes already added. The check sees each deferred constant as
        an input of its shape, so no copy of its values is made."""
        helper = self.onnx.helper
        inputs = [helper.make_tensor_value_info(input_name, self.float_type, ["N", n_features])]
        outputs_info = [helper.make_tensor_value_info(name, kind, shape) for name, kind, shape in outputs]

        def assembled(extra_inputs: list[Any]) -> Any:
            graph = helper.make_graph(self.nodes, "nbstream", inputs + extra_inputs, outputs_info,
                                      initializer=self.constants)
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                                      producer_name="nbstream", doc_string=doc)
            helper.set_model_props(model, metadata)
            return model

        self.onnx.checker.check_model(assembled([helper.make_tensor_value_info(d.name, self.float_type, list(d.shape))
                                                 for d in self.deferred]), full_check=True)
        return Graph(assembled([]), tuple(self.deferred), self.dtype)
