"""Golden vectors of the Delta Lake formats the sync store writes (deletion vectors)."""
