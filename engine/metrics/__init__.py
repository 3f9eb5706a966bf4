"""Metrics and the status page of every server process (Kudu's /metrics and web UI).

    metrics.py    ServerMetrics: one per process, its own prometheus_client CollectorRegistry
                  (never the global one, so several servers in one test process do not
                  collide): counters and histograms updated on the request paths, plus
                  collectors that read the server's state when scraped (Raft roles and
                  terms, WAL bytes, maintenance ops, heartbeat ages, process RSS)
    webserver.py  StatusServer: a small threaded HTTP server (127.0.0.1 by default) with
                  /metrics (Prometheus text format), /status.json and / (HTML of the same)

Who updates what:

    tserver  RPC calls by method and outcome, write and scan latency, rows written by op
             type, row errors, scans and rows returned (TabletServer's handlers are wrapped:
             `ServerMetrics.instrument`); Raft elections and leader changes (sampled every
             tick: a term increase is an election, a new leader uuid a leader change); at
             scrape time: replicas by role and state, each replica's term, commit/applied
             index and WAL bytes, maintenance op runs and seconds, heartbeat age
    master   RPC calls; at scrape time: tablet servers live/dead and each one's heartbeat
             age, tables, tablets, the sys catalog's Raft term and whether it leads
    serve    SQL statements by command and outcome, their latency and rows (counted where
             the session runs a statement: the wire's pipelined fast paths for key point
             reads are not counted); embedded, at scrape time: tablets open, WAL bytes,
             maintenance ops

Everything is in memory: a restarted process starts its counters from zero (Prometheus
handles counter resets).
"""
