"""What the benchmark scripts share: the Kafka benchmark's contenders (run as processes of their own),
timing, and the charts of the figures they print."""
