"""TPC-H schema, loader and the 22 queries (issues: SQL front end, TPC-H runner)."""
