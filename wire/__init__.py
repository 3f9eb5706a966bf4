"""Postgres v3 wire-protocol server (issue: wire server). Imports `kudusql`, `planner`,
`engine`; nothing below imports it."""
