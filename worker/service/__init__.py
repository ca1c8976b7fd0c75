"""The Kafka service: serve wiring, the prequential loop, its state, observability; produce for demos."""
