"""The batch commands over Parquet: train, predict and evaluate, merge."""
