"""Labels that come later: pending examples kept per partition until their label joins them, and their bytes."""
