"""A ServeConfig from option names, as `worker serve` builds one from its command line."""

from __future__ import annotations

from typing import Any

from worker.io.kafka.settings import KafkaSettings
from worker.service.config import SETTING_PARTS, ServeConfig
from worker.setting import settings_of


def serve_config(kafka: KafkaSettings | None = None, *, parameters: dict | None = None, **options: Any) -> ServeConfig:
    """options : values by the option's words (input="in", label_ttl=3600.0, drift_detector="adwin"),
    already of their type; parameters : the model's own (window=100). Topic in, output out and
    group g unless given; nothing connects to the Kafka address."""
    options = {"input": "in", "output": "out", "group": "g", **options}
    parts = {}
    for part, spec in SETTING_PARTS.items():
        cls, make = spec if isinstance(spec, tuple) else (spec, spec)
        mine = {f.name: options.pop(rule.parameter) for f, rule in settings_of(cls) if rule.parameter in options}
        if part == "model":
            mine["parameters"] = parameters or {}
        parts[part] = make(**mine)
    if options:
        raise TypeError(f"no option of worker serve is named {sorted(options)}")
    return ServeConfig(kafka or KafkaSettings("127.0.0.1:9"), **parts)
