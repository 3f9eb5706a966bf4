"""`kudusql tpch`: generate, load and run TPC-H against a kudusql database.

    kudusql tpch gen  --sf N [--out DIR]                     tpchgen-cli -> parquet (cached)
    kudusql tpch load --sf N --data-dir DB [--out DIR]       parquet -> kudusql tables (direct)
    kudusql tpch run  --sf N (--data-dir DB | --dsn URL) [--queries 1,3-5] [--compare duckdb]
                      [--chart out.png]
    kudusql tpch spark --sf N --data-dir DB [--queries ...]   Spark SQL: kudusql vs Parquet

`run` prints one line per query (time, rows, and with --compare: DuckDB's time on the same
parquet, the ratio and whether the answers are equal), then the geometric mean of the
ratios; the exit status is 1 if a query failed or answered differently. The parquet lives
in `--out` (default ./tpch-data/sf<N>). `load --via spark` is the data pipeline: Spark reads
the parquet and writes it through the `kudusql` data source (kudusql/spark) into the
database, over in-process endpoints (the JVM connector's Arrow stream, or Flight for
`--reader python`); its rows/s are those of the load, starting and stopping Spark
printed beside them (`cmd_load`).

It lives with the `kudusql` command (kudusql/cli.py), not in tpch/: it stands on the DB-API
driver, the Spark source and the Flight endpoint, while the tpch package (schema, data,
loading, queries, oracle) stands only on the planner and the engine.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import time


def _parquet_dir(args) -> str:
    return args.out or os.path.join("tpch-data", f"sf{args.sf:g}")


def _progress(table: str, done: int, total: int) -> None:
    pct = 100.0 * done / total if total else 100.0
    end = "\n" if done >= total else ""
    print(f"\r  {table:<10} {done:>12,} / {total:,} rows ({pct:5.1f}%)", end=end, flush=True)


def cmd_gen(args) -> int:
    from tpch.data import TpchgenNotFound, generate
    out = _parquet_dir(args)
    t0 = time.perf_counter()
    try:
        generate(args.sf, out)
    except TpchgenNotFound as e:
        print(f"kudusql tpch gen: {e}", file=sys.stderr)
        return 2
    print(f"TPC-H SF {args.sf:g} parquet in {out} ({time.perf_counter() - t0:.1f} s)")
    return 0


def _source_option(server, reader: str) -> tuple[str, str]:
    """The option that picks the path of format("kudusql"): the JVM connector over the Arrow
    stream endpoint ("endpoint"), or the PySpark data source over Flight ("flight")."""
    if reader == "jvm":
        return "endpoint", str(server.stream_address)
    return "flight", str(server.location)


# tables `load --via spark` writes at a time (Spark jobs submitted from that many threads)
LOAD_JOBS = 2


def _check_reader(spark, reader: str) -> str:
    """The reader to use: "jvm" falls back to "python", saying so, where the JVM connector
    is not loaded (no JDK built it: local_session logged why)."""
    from kudusql.spark import jvm_connector_loaded
    if reader == "jvm" and not jvm_connector_loaded(spark):
        print("kudusql tpch: the JVM Spark connector is not available here; using the "
              "PySpark data source (--reader python)", file=sys.stderr)
        return "python"
    return reader


def load_via_spark(conn, parquet_dir: str, progress=None, reader: str = "jvm",
                   timings: dict | None = None) -> dict[str, int]:
    """The data pipeline: tpchgen parquet -> Spark DataFrames -> kudusql tables through the
    `kudusql` data source (the JVM connector over the in-process Arrow stream endpoint, or
    with reader="python" the PySpark source over Flight; insert mode: a failed row fails
    the load).

    `timings`, if given, gets the wall seconds of the three phases: "spark_start" (the
    SparkSession: the JVM, the connector jar), "load" (tables created, every table read by
    Spark, written and flushed) and "spark_stop". Only "load" is the pipeline's work; the
    other two are the price of a fresh Spark per command. A table's row count comes from
    its parquet footers, not from a Spark job."""
    from kudusql.spark import local_session
    from tpch.data import parquet_files
    from tpch.load import create_tables, flush_table, parquet_row_counts
    from tpch.schema import TABLES
    from wire.arrow_stream import start_endpoints as start
    timings = {} if timings is None else timings
    t0 = time.perf_counter()
    spark = local_session(app_name="kudusql-tpch-load")
    timings["spark_start"] = time.perf_counter() - t0
    rows = {}
    server = None
    try:
        t0 = time.perf_counter()
        create_tables(conn)
        server = start(conn.database)
        reader = _check_reader(spark, reader)
        files = parquet_files(parquet_dir)
        counts = parquet_row_counts(parquet_dir)

        def load_one(t: str) -> None:
            n = counts[t]
            if progress:
                progress(t, 0, n)
            (spark.read.parquet(*files[t]).write.format("kudusql").mode("append")
             .option(*_source_option(server, reader))
             .option("table", t).option("mode", "insert").save())
            flush_table(conn.database.catalog, t)
            rows[t] = n
            if progress:
                progress(t, n, n)

        # LOAD_JOBS tables at a time, the largest first: a table's final flush and the
        # gaps between Spark jobs (planning, task launch, the small tables' few rows)
        # overlap the next table's write instead of leaving Spark's cores idle
        order = sorted(TABLES, key=lambda t: -counts[t])
        pool = concurrent.futures.ThreadPoolExecutor(LOAD_JOBS, thread_name_prefix="tpch-load")
        try:
            for f in [pool.submit(load_one, t) for t in order]:
                f.result()
        finally:
            pool.shutdown(cancel_futures=True)   # after a failure: start no other table
        rows = {t: rows[t] for t in TABLES}
        timings["load"] = time.perf_counter() - t0
    finally:
        t0 = time.perf_counter()
        spark.stop()
        timings["spark_stop"] = time.perf_counter() - t0
        if server is not None:
            server.shutdown()
    return rows


def cmd_load(args) -> int:
    """Load, then print the rows per second of the load itself: tables created, every row
    read, written and flushed. With --via spark that excludes starting and stopping Spark
    (printed beside it, with the whole command's time), which a long-lived Spark
    application pays once, not per load."""
    import kudusql
    from tpch.load import load
    rc = cmd_gen(args)
    if rc:
        return rc
    t_cmd = time.perf_counter()
    timings: dict = {}
    with kudusql.connect(args.data_dir) as conn:
        if args.via == "spark":
            rows = load_via_spark(conn, _parquet_dir(args), progress=_progress,
                                  reader=args.reader, timings=timings)
        else:
            t0 = time.perf_counter()
            rows = load(conn, _parquet_dir(args), progress=_progress)
            timings["load"] = time.perf_counter() - t0
    total_s = time.perf_counter() - t_cmd
    dt = timings["load"]
    total = sum(rows.values())
    extra = ""
    if args.via == "spark":
        extra = (f"; Spark start {timings['spark_start']:.1f} s and stop "
                 f"{timings['spark_stop']:.1f} s not included")
    print(f"loaded {total:,} rows into {args.data_dir} via {args.via} in {dt:.1f} s "
          f"({total / dt:,.0f} rows/s){extra}; the command took {total_s:.1f} s "
          f"({total / total_s:,.0f} rows/s)")
    return 0


def _connect(args):
    import kudusql
    if args.dsn:
        return kudusql.connect(args.dsn)
    return kudusql.connect(args.data_dir)


def _missing_tables(conn) -> list[str]:
    """The TPC-H tables the connection's database does not have."""
    from tpch.schema import TABLES
    missing = []
    for t in TABLES:
        try:
            conn.cursor().execute(f"SELECT 1 FROM {t} LIMIT 0")
        except Exception as e:  # noqa: BLE001 - only "no such table" counts
            if getattr(e, "sqlstate", None) != "42P01":
                raise
            missing.append(t)
    return missing


def cmd_run(args) -> int:
    from tpch.oracle import compare_query, duckdb_connect, duckdb_run, geometric_mean
    from tpch.queries import query
    numbers = _selection(args)
    load = f"kudusql tpch load --sf {args.sf:g} --data-dir {args.data_dir}"
    if not args.dsn and not os.path.isdir(args.data_dir):   # connecting would create it
        print(f"kudusql tpch run: {args.data_dir} does not exist: run `{load}` first",
              file=sys.stderr)
        return 2
    with _connect(args) as conn:
        missing = _missing_tables(conn)
    if missing:
        where = args.dsn or args.data_dir
        print(f"kudusql tpch run: no TPC-H data in {where} (missing: {', '.join(missing)}): "
              f"run `{load if not args.dsn else 'kudusql tpch load'}` first", file=sys.stderr)
        return 2
    duck = None
    if args.compare == "duckdb":
        rc = cmd_gen(args)
        if rc:
            return rc
        duck = duckdb_connect(_parquet_dir(args))
    failed = 0
    ratios = []
    chart_rows: list[tuple[int, float, float | None]] = []
    header = f"{'query':<6}{'ms':>10}{'rows':>9}"
    if duck is not None:
        header += f"{'duckdb ms':>11}{'ratio':>8}  correct"
    print(header)
    with _connect(args) as conn:
        for n in numbers:
            sql = query(n)
            t0 = time.perf_counter()
            try:
                ours = conn.cursor().execute(sql).fetch_arrow_table()
            except Exception as e:  # noqa: BLE001 - a failing query is reported, not fatal
                failed += 1
                print(f"Q{n:02d}   FAILED: {getattr(e, 'sqlstate', None) or 'XX000'}: {e}")
                continue
            ms = (time.perf_counter() - t0) * 1000
            line = f"Q{n:02d}  {ms:>10.1f}{ours.num_rows:>9,}"
            if duck is not None:
                t1 = time.perf_counter()
                expected = duckdb_run(duck, sql)
                dms = (time.perf_counter() - t1) * 1000
                problems = compare_query(n, ours, expected)
                failed += bool(problems)
                ratios.append(ms / dms if dms > 0 else float("nan"))
                line += f"{dms:>11.1f}{ratios[-1]:>7.1f}x  {'yes' if not problems else 'NO'}"
                chart_rows.append((n, ms, dms))
                if problems and args.verbose:
                    line += "\n      " + "\n      ".join(problems[:5])
            if duck is None:
                chart_rows.append((n, ms, None))
            print(line)
    geo, n = geometric_mean(ratios)
    if geo is not None:
        print(f"geometric mean of ours/duckdb over {n} queries: {geo:.2f}x")
    if args.chart:
        draw_chart(args.chart, chart_rows, f"TPC-H SF {args.sf:g}")
    return 1 if failed else 0


def draw_chart(path: str, rows: list[tuple[int, float, float | None]], title: str) -> None:
    """Per-query times (log scale): kudusql, and DuckDB when compared. matplotlib is an
    optional (bench) dependency: without it the chart is skipped with a message."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--chart needs matplotlib: pip install -e '.[bench]'", file=sys.stderr)
        return
    labels = [f"Q{n}" for n, _, _ in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.5), 4))
    width = 0.4 if any(d is not None for _, _, d in rows) else 0.8
    ax.bar([i - width / 2 if width < 0.8 else i for i in x], [m for _, m, _ in rows], width,
           label="kudusql")
    if width < 0.8:
        ax.bar([i + width / 2 for i in x], [d or 0 for _, _, d in rows], width,
               label="DuckDB (same parquet)")
    ax.set_xticks(list(x), labels, rotation=90)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log scale)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"chart written to {path}")


def cmd_spark(args) -> int:
    """The paper's Table 1 comparison: the queries in Spark SQL over kudusql tables (read
    through the data source, one partition per tablet, filters pushed) and over the same
    data as Parquet; answers checked against each other, times and the geomean printed."""
    import kudusql
    from kudusql.spark import local_session
    from tpch.data import parquet_files
    from tpch.oracle import compare_query, geometric_mean
    from tpch.queries import query
    from tpch.schema import TABLES
    from wire.arrow_stream import start_endpoints as start
    numbers = _selection(args)
    rc = cmd_gen(args)
    if rc:
        return rc
    files = parquet_files(_parquet_dir(args))
    failed, ratios = 0, []
    with kudusql.connect(args.data_dir) as conn:
        server = start(conn.database)
        spark = local_session(app_name="kudusql-tpch-spark")
        try:
            reader = _check_reader(spark, args.reader)
            print(f"kudusql read through the {reader} path of format(\"kudusql\")")

            def views(source: str) -> None:
                for t in TABLES:
                    if source == "kudusql":
                        df = (spark.read.format("kudusql")
                              .option(*_source_option(server, reader))
                              .option("table", t).option("pushdown", "true").load())
                    else:
                        df = spark.read.parquet(*files[t])
                    df.createOrReplaceTempView(t)

            def timed(n: int):
                t0 = time.perf_counter()
                table = spark.sql(query(n)).toArrow()
                return table, (time.perf_counter() - t0) * 1000

            print(f"{'query':<6}{'kudusql ms':>12}{'parquet ms':>12}{'ratio':>8}  same answer")
            for n in numbers:
                try:
                    views("kudusql")
                    ours, ms = timed(n)
                    views("parquet")
                    theirs, pms = timed(n)
                except Exception as e:  # noqa: BLE001 - reported per query, not fatal
                    failed += 1
                    print(f"Q{n:02d}   FAILED: {type(e).__name__}: {str(e)[:200]}")
                    continue
                problems = compare_query(n, ours, theirs)
                failed += bool(problems)
                ratios.append(ms / pms if pms > 0 else float("nan"))
                print(f"Q{n:02d}  {ms:>12.1f}{pms:>12.1f}{ratios[-1]:>7.1f}x  "
                      f"{'yes' if not problems else 'NO'}")
        finally:
            spark.stop()
            server.shutdown()
    geo, n = geometric_mean(ratios)
    if geo is not None:
        print(f"geometric mean of Spark-over-kudusql / Spark-over-Parquet over {n} "
              f"queries: {geo:.2f}x")
    return 1 if failed else 0


def _selection(args) -> list[int]:
    from tpch.queries import parse_selection
    try:
        return parse_selection(args.queries)
    except ValueError as e:
        raise SystemExit(f"kudusql tpch: {e}") from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="tpch_command", metavar="ACTION", required=True)

    def common(sp, data_dir: bool):
        sp.add_argument("--sf", type=float, default=1.0,
                        help="scale factor (default: %(default)s)")
        sp.add_argument("--out", default=None,
                        help="parquet directory (default: ./tpch-data/sf<SF>)")
        if data_dir:
            sp.add_argument("--data-dir", default="./kudusql-data",
                            help="kudusql database directory (default: %(default)s)")

    g = sub.add_parser("gen", help="generate TPC-H parquet with tpchgen-cli (cached)",
                       description="Generate the eight TPC-H tables as parquet (tpchgen-cli); "
                                   "a complete earlier generation is reused.")
    common(g, False)
    g.set_defaults(func=cmd_gen)
    ld = sub.add_parser("load", help="create the TPC-H tables and load them",
                        description="Create the TPC-H tables (primary keys, hash "
                                    "partitioning) in --data-dir and load the generated "
                                    "parquet, with progress.")
    common(ld, True)
    ld.add_argument("--via", choices=["direct", "spark"], default="direct",
                    help="direct: parquet into the tables in this process; spark: the data "
                         "pipeline, Spark DataFrames written through the kudusql data "
                         "source (pyspark and Java 17 needed) (default: %(default)s)")
    ld.add_argument("--reader", choices=["jvm", "python"], default="jvm",
                    help="with --via spark: the JVM connector (Arrow stream endpoint) or the "
                         "PySpark data source (Flight) (default: %(default)s)")
    ld.set_defaults(func=cmd_load)
    r = sub.add_parser("run", help="run the 22 queries, optionally checked against DuckDB",
                       description="Run TPC-H queries against --data-dir (embedded) or "
                                   "--dsn (a server); with --compare duckdb, DuckDB runs the "
                                   "same queries on the same parquet and the answers are "
                                   "compared.")
    common(r, True)
    r.add_argument("--dsn", default=None, help="postgresql://... of a kudusql server instead "
                                               "of --data-dir")
    r.add_argument("--queries", default=None, help="e.g. 1,3,5-7 (default: all 22)")
    r.add_argument("--compare", choices=["duckdb"], default=None,
                   help="check answers and times against DuckDB (a test/bench dependency)")
    r.add_argument("-v", "--verbose", action="store_true", help="print answer differences")
    r.add_argument("--chart", default=None, metavar="OUT.png",
                   help="draw the per-query times (and DuckDB's) to a PNG (needs matplotlib)")
    r.set_defaults(func=cmd_run)
    sp = sub.add_parser("spark", help="the queries in Spark SQL: over kudusql vs over Parquet",
                        description="Run TPC-H queries in Spark SQL twice: reading the kudusql "
                                    "tables in --data-dir through the kudusql data source, "
                                    "and reading the same data as Parquet; answers are "
                                    "compared and the time ratio reported (Kudu paper, "
                                    "Table 1). Needs pyspark and Java 17.")
    common(sp, True)
    sp.add_argument("--queries", default=None, help="e.g. 1,3,5-7 (default: all 22)")
    sp.add_argument("--reader", choices=["jvm", "python"], default="jvm",
                    help="read kudusql through the JVM connector (Arrow stream endpoint) or the "
                         "PySpark data source (Flight) (default: %(default)s)")
    sp.set_defaults(func=cmd_spark)
