"""Where records enter and leave the worker: Parquet files, Kafka topics, and message decoding."""
