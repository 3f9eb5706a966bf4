"""The README's streaming pipeline, run as written: its code block between the
`pipeline-example` markers, against a real server (pg wire + Flight, in this process) with
only the ports and the checkpoint directory substituted. A rate source into kudusql, SQL
(psycopg over the pg wire) sees the rows within seconds, and the table's change stream
lands in a second table: the 10 updates, each exactly once. KUDUSQL_LONG=1."""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re

import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark>=4 is not installed")
pytest.importorskip("psycopg")

from tests.wire.conftest import start_server, stop_server  # noqa: E402
from wire import arrow_stream  # noqa: E402

# two streaming queries side by side for ~1-2 minutes on a loaded 2-core machine
pytestmark = [pytest.mark.long,
              pytest.mark.skipif(os.environ.get("KUDUSQL_LONG") != "1",
                                 reason="set KUDUSQL_LONG=1 for the README pipeline")]

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    text = README.read_text()
    m = re.search(r"<!-- pipeline-example -->\n```python\n(.*?)```\n<!-- /pipeline-example -->",
                  text, re.S)
    assert m, "README.md lost its pipeline example"
    return m.group(1)


def test_readme_pipeline(spark, tmp_path):
    r = start_server(tmp_path / "db")
    ends = arrow_stream.start_endpoints(r.db, "127.0.0.1")
    try:
        code = (example().replace("port=5433", f"port={r.port}")
                .replace("grpc://127.0.0.1:8815", ends.location)
                .replace("/tmp/kudusql-ck", str(tmp_path / "ck")))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md:pipeline-example", "exec"), {})
        printed = out.getvalue()
        age = float(re.search(r"SQL sees rows (-?[\d.]+) s after", printed).group(1))
        assert age < 10, printed          # within seconds of Spark producing them
        updates = re.search(r"^\[.*\]$", printed, re.M).group(0)
        assert updates == repr([(i, -1.0, False) for i in range(10)]), printed
    finally:
        ends.shutdown()
        stop_server(r)
