"""Where results go: predictions and dead letters."""
