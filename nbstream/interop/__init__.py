"""Models as scikit-learn estimators, and the size of their dense tables."""
