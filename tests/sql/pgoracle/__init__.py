"""A second oracle for SQL: PostgreSQL 15's recorded answers to a corpus of everyday
statements (corpus.py), compared with kudusql's by tests/sql/test_pg_oracle.py. The fuzzers
(tests/sql/fuzz) compare random queries with DuckDB; this corpus covers what they do not
generate (string, date and math functions, window frames, writes, errors) and compares with
the system whose dialect kudusql speaks."""
