"""The Kafka service: its wiring, sessions, the prequential loop, the partitions it owns and what it tells operators."""
