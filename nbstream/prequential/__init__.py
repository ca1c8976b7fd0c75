"""Test-then-train scoring machinery: what each row sees of the rows learned before it."""
