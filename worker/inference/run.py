"""`worker serve-model`: a snapshot answering the inference API until the process is asked to stop."""

from __future__ import annotations

import gc
import logging
import signal
import threading
from pathlib import Path

from ..errors import ConfigError
from ..model_names import NAME_RULE, is_model_name
from .config import InferenceApiConfig
from .server import InferenceServer
from .snapshot_file import SnapshotLoadError, SnapshotModel, newest_copy

log = logging.getLogger(__name__)


def serve_snapshot(path: Path, name: str | None, reload: bool, config: InferenceApiConfig) -> None:
    """Answer requests about the model of ``path`` (named ``name``, default its file name) until
    SIGTERM or SIGINT. ConfigError: no --http-port, a name that is not one, a file that does not load."""
    if config.http_port is None:
        raise ConfigError("serve-model needs --http-port: the port its API answers on.")
    name = name if name is not None else newest_copy(path).stem
    if not is_model_name(name):
        raise ConfigError(f"the model's name {name[:80]!r} is not one ({NAME_RULE}); give --model-name.")
    try:
        source = SnapshotModel(path, name, reload=reload)
    except SnapshotLoadError as error:
        raise ConfigError(str(error)) from None
    server = InferenceServer(config, source)
    # Requests make many short-lived objects, which set off collections of the whole heap: what
    # start-up made (modules, the model) is never garbage, and leaving it out of them keeps the
    # pauses (the slowest answers) short.
    gc.freeze()
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.start()
        model = source.models()[name]
        log.info("serving a snapshot", extra={"model": name, "snapshot": str(path), "version": model.version,
                                              "kind": model.pipeline.model.kind, "reload": reload})
        while not stop.wait(1.0):
            if not server.running:
                raise RuntimeError("the inference API's server stopped by itself (its log says why)")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
    log.info("stopped")
