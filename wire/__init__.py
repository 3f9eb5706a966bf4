"""Postgres v3 wire-protocol server: real PostgreSQL clients (psql, asyncpg, psycopg 3,
SQLAlchemy, JDBC) talk to kudusql unmodified. Imports `kudusql`, `planner`, `engine`;
nothing below imports it. Design note: docs/wire.md.

    protocol     the codec: frontend bytes -> messages, backend messages -> bytes (no I/O)
    types        OIDs, Arrow <-> OID, whole-column text/binary encoders, DataRow batches,
                 parameter decoders
    lexer        just enough SQL lexing for the statements answered here
    settings     SET / RESET / SHOW and ParameterStatus (GUCs)
    transaction  I / T / E status, BEGIN / COMMIT / ROLLBACK / SAVEPOINT
    portal       prepared statements, portals, DECLARE / FETCH / CLOSE cursors
    copy         COPY FROM STDIN / TO STDOUT in text, csv and binary
    auth         users.json, trust / cleartext / md5 / SCRAM-SHA-256, CREATE/ALTER/DROP USER
    builtins     connect-time queries (version(), current_schema(), ...) until pg_catalog
    pg_catalog   PostgreSQL's system catalogs as views over the engine catalog
    connection   one client: the message flow around one Session (asyncio)
    server       listener, connection limit, cancel keys, thread pool; `serve()` for the CLI
"""
