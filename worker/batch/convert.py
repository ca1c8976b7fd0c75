"""`worker convert`: a snapshot as a model another runtime reads (ONNX), written atomically."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nbstream.arrow import Pipeline
from nbstream.persistence.atomic import AtomicFile
from nbstream.persistence.snapshot import load_with_header

from ..errors import ConfigError
from ..io.files import refuse_replacing_an_input
from ..setting import setting

FORMATS = ("onnx",)
DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class Conversion:
    """What a snapshot is converted to: the format, the graph's float type, and whether a pipeline's
    model is converted alone."""
    fmt: str = setting("onnx", "--format", env="CONVERT_FORMAT",
                       help="onnx: an ONNX graph of standard operators, for ONNX Runtime and the others (pip install "
                            "'nbstream\\[onnx]').")
    dtype: str = setting("float64", "--dtype",
                         help="float64 (the model's probabilities to rounding) or float32 (float32's precision; see "
                              "the docs).")
    model_only: bool = setting(False, "--model-only",
                               help="Convert a pipeline's model alone: its input is the encoded features (for text, "
                                    "the hashed counts).")


@dataclass
class Converted:
    """What was written: the file, the model's kind, classes and features, and the graph's dtype."""
    out: Path
    kind: str
    n_classes: int
    n_features: int
    dtype: str


def convert(snapshot: Path, out: Path, conversion: Conversion = Conversion()) -> Converted:
    """Write the snapshot's model as ``conversion`` says. A worker snapshot is a pipeline (model and
    feature encoder): exported whole unless ``model_only``; a text pipeline only with ``model_only``."""
    from nbstream.onnx import write_onnx

    fmt, dtype = conversion.fmt, conversion.dtype
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}.")
    if dtype not in DTYPES:
        raise ConfigError(f"--dtype must be float64 or float32; got {dtype!r}.")
    refuse_replacing_an_input(out, [snapshot], "the ONNX model")
    model, header = load_with_header(snapshot)
    source: object = model
    if "features" in header["meta"] and not conversion.model_only:
        pipeline = Pipeline.from_snapshot_meta(model, header["meta"], snapshot)
        if pipeline.features.kind == "text":
            raise ConfigError(f"{snapshot} is a text pipeline, whose words are hashed, and hashing is no ONNX "
                              f"operator: add --model-only to convert its model alone (its input: the hashed counts of "
                              f"{model.n_features_in_:,} features) and hash the text outside (nbstream.arrow's "
                              f"Pipeline.transform).")
        source = pipeline
    try:
        with AtomicFile(out) as file:  # written from the model's tables, never copied whole
            write_onnx(source, file, dtype=dtype)
    except ValueError as error:  # what the model holds cannot be a graph (too large, labels of mixed types)
        raise ConfigError(f"{snapshot}: {error}") from None
    return Converted(out, model.kind, len(model.classes_), model.n_features_in_, dtype)
