"""The checks of values read from JSON that anyone may have written: the library's (``nbstream.checked``)."""

from nbstream.checked import INT32_MAX, INT64_MAX, integer, number, optional_text, required, shown

__all__ = ["INT32_MAX", "INT64_MAX", "integer", "number", "optional_text", "required", "shown"]
