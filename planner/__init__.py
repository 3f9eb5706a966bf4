"""SQL planner: sqlglot KuduSQL dialect -> bind -> logical plan -> optimizer rules ->
physical operators over Arrow batches. Imports `engine`, never `wire` or `shell`
(docs/sql.md).

Modules: `dialect` (KuduSQL: Postgres + Impala's Kudu DDL), `ddl` (CREATE TABLE -> engine
schemas), `utility` (DROP/ALTER/SHOW/DESCRIBE), `binder` (AST -> logical plan, subqueries),
`logical` (plan nodes, EXPLAIN text), `rules` (named optimizer rules), `executor` (Arrow
operators), `expr` (scalar expressions), `statement` (one statement: queries, DML, CTAS,
EXPLAIN, Describe), `plan_cache`, `result` (StatementResult), `errors` (SqlError),
`system_tables` (kudu_system.servers / .replicas, a catalog wrapper every Session uses).
"""
