"""The `kudusql` command: one entry point, one subcommand per tool.

    kudusql serve [--data-dir DIR] [--host H] [--port N] [--auth METHOD]
                  [--max-connections N] [--tls-cert F --tls-key F] [--require-tls]
                  [--flight-port N] [--arrow-port N] [--query-mem-limit SIZE] [--http-port N]
                  [--commit-delay US] [--commit-siblings N]
    kudusql shell [DSN | --data-dir DIR] [-c SQL] [-f FILE] [--format F] [-x]
    kudusql tpch gen|load|run --sf N ...
    kudusql master | tserver | cluster start|stop|status   (kudusql/cluster.py)

`serve` runs the Postgres wire server (wire/server.py) over the database in the data
directory (created if missing). Loopback addresses may use trust authentication (the
default); any other address needs a password method, and the server refuses to start
otherwise. `shell` is the SQL shell (shell/main.py, docs/shell.md). `tpch` generates,
loads and runs TPC-H (kudusql/tpch_cli.py over the tpch package). Each subcommand is a function `(args) -> exit status`
registered in `_parser()`.
"""

from __future__ import annotations

import argparse
import sys


def _cmd_serve(args: argparse.Namespace) -> int:
    from engine.errors import EngineError
    from wire.server import ConfigError, ServerConfig, serve

    from kudusql import logs
    logs.configure(args.verbose)
    config = ServerConfig(host=args.host, port=args.port, auth=args.auth,
                          max_connections=args.max_connections, tls_cert=args.tls_cert,
                          tls_key=args.tls_key, require_tls=args.require_tls,
                          flight_port=args.flight_port, arrow_port=args.arrow_port,
                          query_mem_limit=args.query_mem_limit,
                          commit_delay_us=args.commit_delay,
                          commit_siblings=args.commit_siblings)
    try:
        if args.masters:
            from kudusql.cluster import parse_masters, rpc_secret, tls_config, serve_cluster
            return serve_cluster(config, parse_masters(args.masters), rpc_secret(args),
                                 args.replica_selection, args.http_port, args.http_host,
                                 tls_config(args, server=False))
        if args.rpc_cert or args.rpc_key or args.rpc_ca:
            print("kudusql serve: --rpc-cert/--rpc-key/--rpc-ca are for serving a cluster "
                  "(--masters); --tls-cert/--tls-key set TLS for SQL clients", file=sys.stderr)
            return 2
        from kudusql.cluster import start_sql_status
        return serve(config, args.data_dir, on_open=lambda db: start_sql_status(
            db, args.http_port, args.http_host))
    except ConfigError as e:
        print(f"kudusql serve: {e}", file=sys.stderr)
        return 2
    except EngineError as e:    # e.g. 55006: another process owns the data directory
        print(f"kudusql serve: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kudusql serve: cannot listen on {args.host}:{args.port}: {e}",
              file=sys.stderr)
        return 1


def _cmd_shell(args: argparse.Namespace) -> int:
    from shell.main import run
    return run(args)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kudusql",
        description="kudusql: Apache Kudu's storage design with a SQL front end on the "
                    "Postgres wire protocol.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser(
        "serve", help="run the Postgres wire server",
        description="Serve the database in --data-dir to PostgreSQL clients (psql, asyncpg, "
                    "psycopg, JDBC, ...). Connect with e.g. "
                    "`psql -h 127.0.0.1 -p 5433 -U kudusql`.")
    s.add_argument("--data-dir", default="./kudusql-data",
                   help="database directory, created if missing (default: %(default)s)")
    s.add_argument("--host", default="127.0.0.1",
                   help="address(es) to listen on, comma-separated; non-loopback addresses "
                        "require --auth with passwords (default: %(default)s)")
    s.add_argument("--port", type=int, default=5433,
                   help="TCP port (default: %(default)s)")
    s.add_argument("--auth", default="trust",
                   choices=["trust", "password", "md5", "scram-sha-256"],
                   help="client authentication: trust (loopback only), password "
                        "(cleartext), md5 or scram-sha-256; users live in users.json in the "
                        "data directory, the default user is `kudusql` (its password can be "
                        "set with the KUDUSQL_PASSWORD environment variable or ALTER USER) "
                        "(default: %(default)s)")
    s.add_argument("--max-connections", type=int, default=100,
                   help="concurrent client sessions; one more gets SQLSTATE 53300 "
                        "(default: %(default)s)")
    s.add_argument("--tls-cert", default=None,
                   help="PEM certificate: answer SSLRequest with TLS (with --tls-key)")
    s.add_argument("--tls-key", default=None, help="PEM private key for --tls-cert")
    s.add_argument("--require-tls", action="store_true",
                   help="refuse connections that do not switch to TLS")
    s.add_argument("--flight-port", type=int, default=None,
                   help="also serve Arrow Flight (the PySpark data source's endpoint, "
                        "docs/spark.md) on this port of the first --host, which must be a "
                        "loopback address (no authentication); off by default")
    s.add_argument("--arrow-port", type=int, default=0,
                   help="with --flight-port: the Arrow IPC stream endpoint of the JVM Spark "
                        "connector (docs/spark.md) on this port (default: any free port, "
                        "printed)")
    s.add_argument("--query-mem-limit", default=None, metavar="SIZE",
                   help="memory one statement may hold for intermediate results before it "
                        "fails with SQLSTATE 53200, e.g. 2GB (default: a quarter of the "
                        "machine's RAM; 0: no limit); sessions may SET query_mem_limit")
    s.add_argument("--commit-delay", type=int, default=None, metavar="US",
                   help="WAL group commit: microseconds a write about to fsync waits for "
                        "others to share the fsync, when at least --commit-siblings other "
                        "writes are waiting (PostgreSQL's commit_delay; 0: off; default: "
                        "the engine's, docs/engine-api.md)")
    s.add_argument("--commit-siblings", type=int, default=None, metavar="N",
                   help="other waiting writes needed before --commit-delay applies "
                        "(PostgreSQL's commit_siblings; default: the engine's)")
    s.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    from kudusql.cluster import add_commands as cluster_commands
    from kudusql.cluster import add_serve_arguments
    add_serve_arguments(s)
    s.set_defaults(func=_cmd_serve)
    cluster_commands(sub)

    from shell.main import add_arguments as shell_arguments
    sh = sub.add_parser(
        "shell", help="the SQL shell (embedded, or a server over the wire)",
        description="An interactive SQL shell with completion, history and \\d; "
                    "or run -c / -f / standard input and exit (status 1 on error).")
    shell_arguments(sh)
    sh.set_defaults(func=_cmd_shell)

    from kudusql.tpch_cli import add_arguments as tpch_arguments
    tp = sub.add_parser(
        "tpch", help="generate, load and run TPC-H",
        description="TPC-H: `gen` parquet with tpchgen-cli, `load` it into a database, "
                    "`run` the 22 queries (optionally against DuckDB).")
    tpch_arguments(tp)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
