"""The nbstream worker: I/O around the nbstream library (datasets, Parquet, Kafka, CLI)."""
