"""Pieces of the Kafka benchmark (scripts/bench_kafka.py): contenders run as processes of their own."""
