"""Parquet: files read as batches with positions, predictions written atomically, rejected rows set aside."""
