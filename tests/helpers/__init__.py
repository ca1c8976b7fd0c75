"""Helpers shared by the test suites: paths and data, the CLI, the Kafka broker."""
