"""What a model learns: counts, sparse counts, moments, and sliding windows of them."""
