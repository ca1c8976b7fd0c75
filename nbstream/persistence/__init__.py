"""Snapshots, the framing of every stored format, and atomic writes."""
