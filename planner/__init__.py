"""SQL planner (issue: SQL front end): sqlglot KuduSQL dialect -> bind -> logical plan ->
optimizer rules -> physical operators over Arrow batches. Imports `engine`, never `wire` or
`shell`."""
