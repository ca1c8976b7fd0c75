"""One input partition of the service: its statistics, pending examples, drift watch, quality and offsets."""
