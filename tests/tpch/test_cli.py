"""`kudusql tpch load` and `kudusql tpch run --compare duckdb` end to end."""

from kudusql.cli import main
from tests.tpch.conftest import TEST_SF


def test_load_then_run_against_duckdb(tpch_parquet, tmp_path, capsys):
    db = str(tmp_path / "db")
    common = ["--sf", f"{TEST_SF:g}", "--out", tpch_parquet, "--data-dir", db]
    assert main(["tpch", "load", *common]) == 0
    assert "loaded" in capsys.readouterr().out
    assert main(["tpch", "run", *common, "--queries", "1,6,13", "--compare", "duckdb"]) == 0
    out = capsys.readouterr().out
    for q in ("Q01", "Q06", "Q13"):
        line = next(ln for ln in out.splitlines() if ln.startswith(q))
        assert line.rstrip().endswith("yes"), line
    assert "geometric mean" in out


def test_spark_load_path_says_it_is_not_there_yet(tmp_path, capsys):
    assert main(["tpch", "load", "--via", "spark", "--data-dir", str(tmp_path / "db")]) == 2
    assert "PySpark" in capsys.readouterr().err
