"""SQL planner (issue: SQL front end): sqlglot KuduSQL dialect -> bind -> logical plan ->
optimizer rules -> physical operators over Arrow batches. Imports `engine`, never `wire` or
`shell`.

Modules so far: `dialect` (the KuduSQL sqlglot dialect: Postgres + Impala's Kudu DDL),
`ddl` (CREATE TABLE -> engine Schema / PartitionSchema), `errors` (SqlError + SQLSTATE)."""
