"""--model-key and --key-prior-weight: a model per key on one stream.

Keys live with their partition: the service reads a message's key from its Kafka record key,
so every message of a key reaches the same partition, and so the same replica, whose state keeps
that key's counts. A topic keyed otherwise is re-keyed first (docs/service/keys.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from nbstream.naive_bayes.keyed import DEFAULT_PRIOR_WEIGHT

from ...config import TrainConfig
from ...errors import ConfigError
from ...setting import Checked, parse_duration, setting, setting_like
from ..pending.store import LONGEST_TTL_SECONDS

RECORD_KEY = "key"  # --model-key's value that names the Kafka record key


def check_model_key(value: str | None) -> None:
    """--model-key as given: the record key; a message field is refused, naming the recipe."""
    if value is None or value == RECORD_KEY:
        return
    raise ConfigError(f"--model-key {value}: keys live with their partition, so the service reads them from the "
                      f"record key. Produce the messages keyed by {value!r} (or re-key the topic: docs/service/"
                      f"keys.md) and pass --model-key key.")


@dataclass(frozen=True)
class KeysConfig(Checked):
    """Whether every message is predicted and learned by a model of its own key, and how far a
    key's model leans on the group's."""
    model_key: str | None = setting(None, "--model-key",
                                    help="key: one model per Kafka record key (a user, a tenant, an author), each "
                                         "backed off to the group's model; predictions name the key and its "
                                         "examples (\"key\", \"key_examples\").")
    key_ttl: float | None = setting(None, "--key-ttl", low=0, high=LONGEST_TTL_SECONDS,
                                    parse=lambda text: parse_duration(text, "--key-ttl"),
                                    help="Drop a key unseen this long (90s, 15m, 36h, 7d), by its partition's "
                                         "clock (the newest message time): its counts leave memory and the keys "
                                         "topic; counted and logged (default: keys are kept).")
    max_keys: int | None = setting(None, "--max-keys", low=1,
                                   help="Keep at most N keys' counts in this replica's memory: after each commit "
                                        "the least recently used beyond N leave it, and a key's next message reads "
                                        "its counts back from the keys topic, exactly (default: every key is kept).")
    key_prior_weight: float = setting_like(TrainConfig, "key_prior_weight", DEFAULT_PRIOR_WEIGHT,
                                           help="m: a key's model is its own counts plus m pseudo-examples drawn "
                                                "from the group's model (0: the key's own model; a key never seen "
                                                "gets the group's).")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_model_key(self.model_key)
        for option, given in (("--max-keys", self.max_keys is not None), ("--key-ttl", self.key_ttl is not None)):
            if given and self.model_key is None:
                raise ConfigError(f"{option} bounds the keys of a model per key: it needs --model-key key.")

    @property
    def keyed(self) -> bool:
        return self.model_key is not None
