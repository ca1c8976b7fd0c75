"""Helpers around the service for demos and benchmarks (not the service): `worker produce`."""
