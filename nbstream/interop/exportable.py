"""What may leave nbstream for another library or runtime: one of the five models, or a pipeline."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TypeGuard

if TYPE_CHECKING:  # nbstream.arrow needs pyarrow, which a bare model does not
    from ..arrow.pipeline import Pipeline


def is_pipeline(source: object) -> TypeGuard[Pipeline]:
    """Whether ``source`` is a ``nbstream.arrow.Pipeline``. A pipeline exists only once nbstream.arrow
    is loaded, so asking needs no pyarrow: a bare model leaves without it."""
    pipeline_module = sys.modules.get("nbstream.arrow.pipeline")
    return pipeline_module is not None and isinstance(source, pipeline_module.Pipeline)
