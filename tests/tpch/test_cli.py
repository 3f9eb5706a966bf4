"""`kudusql tpch load` and `kudusql tpch run --compare duckdb` end to end."""

import re

from kudusql.cli import main
from tests.tpch.conftest import TEST_SF


def test_load_then_run_against_duckdb(tpch_parquet, tmp_path, capsys):
    db = str(tmp_path / "db")
    common = ["--sf", f"{TEST_SF:g}", "--out", tpch_parquet, "--data-dir", db]
    assert main(["tpch", "load", *common]) == 0
    assert "loaded" in capsys.readouterr().out
    chart = tmp_path / "q.png"
    assert main(["tpch", "run", *common, "--queries", "1,6,13", "--compare", "duckdb",
                 "--chart", str(chart)]) == 0
    out = capsys.readouterr().out
    assert chart.stat().st_size > 1000 and chart.read_bytes()[:4] == b"\x89PNG"
    for q in ("Q01", "Q06", "Q13"):
        line = next(ln for ln in out.splitlines() if ln.startswith(q))
        assert line.rstrip().endswith("yes"), line
    assert "geometric mean" in out




def test_tpch_loaded_through_spark_gives_the_same_22_answers(tpch_parquet, tmp_path, capsys,
                                                              monkeypatch):
    """The data pipeline: parquet -> Spark -> kudusql data source -> tables; every answer
    must equal DuckDB's on the same parquet (the direct load is checked the same way in
    test_tpch.py)."""
    import pytest
    try:
        from kudusql.spark import check_environment
        check_environment()
    except Exception as e:  # noqa: BLE001 - no pyspark or Java here: nothing to test
        pytest.skip(f"Spark unavailable: {e}")
    import kudusql.tpch_cli as cli
    events = []
    real_progress = cli._progress

    def progress(table, done, total):
        events.append((table, done == total and done > 0))
        real_progress(table, done, total)
    monkeypatch.setattr(cli, "_progress", progress)
    db = str(tmp_path / "db")
    common = ["--sf", f"{TEST_SF:g}", "--out", tpch_parquet, "--data-dir", db]
    assert main(["tpch", "load", "--via", "spark", *common]) == 0
    out = capsys.readouterr().out
    assert "via spark" in out
    # two tables at a time, the largest first: orders starts before lineitem is done
    assert events.index(("orders", False)) < events.index(("lineitem", True)), events
    # the rows/s are the load's: starting and stopping Spark are timed apart, and the
    # three phases are disjoint parts of the command's time
    m = re.search(r"via spark in ([\d.]+) s \(.*Spark start ([\d.]+) s and stop ([\d.]+) s "
                  r"not included; the command took ([\d.]+) s", out)
    assert m, out
    load_s, start_s, stop_s, total_s = map(float, m.groups())
    # (no lower bound on the start: in a suite, an earlier test's SparkSession may still
    # be up, and getOrCreate then takes ~0.1 s; alone it takes seconds)
    assert load_s + start_s + stop_s <= total_s + 0.15, out
    assert main(["tpch", "run", *common, "--compare", "duckdb"]) == 0
    out = capsys.readouterr().out
    assert sum(1 for ln in out.splitlines() if ln.startswith("Q") and
               ln.rstrip().endswith("yes")) == 22, out
    # Spark SQL over the kudusql tables vs over the same Parquet (the paper's Table 1)
    assert main(["tpch", "spark", *common, "--queries", "3,6"]) == 0
    out = capsys.readouterr().out
    assert [ln.split()[0] for ln in out.splitlines() if ln.rstrip().endswith("yes")] == \
        ["Q03", "Q06"], out
    assert "Spark-over-kudusql / Spark-over-Parquet" in out


def test_run_without_data_says_to_load_first_and_creates_nothing(tmp_path, capsys):
    db = tmp_path / "nodata"
    assert main(["tpch", "run", "--sf", "0.01", "--data-dir", str(db), "--queries", "1"]) == 2
    err = capsys.readouterr().err
    assert "kudusql tpch load --sf 0.01 --data-dir" in err and "first" in err
    assert not db.exists()
    # an existing database without the TPC-H tables: the same advice, naming what is missing
    import kudusql
    with kudusql.connect(str(db)) as conn:
        conn.cursor().execute("CREATE TABLE region (r_regionkey INT PRIMARY KEY)")
    assert main(["tpch", "run", "--sf", "0.01", "--data-dir", str(db), "--queries", "1"]) == 2
    err = capsys.readouterr().err
    assert "no TPC-H data" in err and "lineitem" in err and "region," not in err
