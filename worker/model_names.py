"""What names a model: the served model's default name, and the form every name takes.

A name is a letter or digit, then up to 63 letters, digits, '_', '.' or '-': it is a JSON key of
predictions and of partition states, and a label value of the metrics.
"""

from __future__ import annotations

import re

DEFAULT_NAME = "main"  # the served model's name when --model-name is not given, and a state's that names none
NAME_RULE = "a letter or digit, then up to 63 letters, digits, '_', '.' or '-'"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def is_model_name(value: object) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None
