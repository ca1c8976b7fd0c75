"""Kafka: a topic as a source of records, and a producer for predictions and dead letters."""
