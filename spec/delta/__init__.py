"""Delta Lake's own formats that the sync store writes beside plain Parquet (deletion vectors)."""
