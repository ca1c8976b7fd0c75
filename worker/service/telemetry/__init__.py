"""What the service tells its operators: Prometheus metrics, their HTTP endpoints, logs, consumer lag."""
