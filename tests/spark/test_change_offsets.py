"""The change sources' drivers without Spark: the offsets each one's latestOffset returns,
for the PySpark source (kudusql/spark/streaming.py KudusqlChangeReader, called directly)
and the JVM connector's (KudusqlChangeStream, driven by tests/spark/java/
ChangeStreamProbe.java in a plain JVM: no Spark session, a second or two to start).

Both run the same scenario against one server, so what the offsets do is pinned down
without Spark's trigger timing: docs/spark.md "A stream away too long" and "Rate limit"."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark>=4 is not installed")

from tests.spark.test_arrow_stream import call, scan  # noqa: E402

PROBE = Path(__file__).resolve().parent / "java" / "ChangeStreamProbe.java"


class PythonDriver:
    def __init__(self, server, table: str, columns: list[str], **opts):
        from pyspark.sql.types import StringType, StructField, StructType

        from kudusql.spark import streaming
        fields = [StructField(c, StringType()) for c in columns]
        fields += [StructField(c, StringType()) for c in streaming.CHANGE_COLUMNS]
        self.r = streaming.KudusqlChangeReader(
            {"flight": server.location, "table": table, **opts}, StructType(fields))
        self.limit = self.r.getDefaultReadLimit() if hasattr(
            self.r, "getDefaultReadLimit") else None

    def initial(self) -> dict:
        return self.r.initialOffset()

    def latest(self, start: dict) -> dict:
        return self.r.latestOffset(start, self.limit)

    def partitions(self, start: dict, end: dict) -> int:
        return len(self.r.partitions(start, end))

    def close(self) -> None:
        pass


class JvmDriver:
    """ChangeStreamProbe in its own JVM; every answer awaited with a bound."""

    def __init__(self, classes: str, cp: str, server, table, columns, **opts):
        args = [f"endpoint={server.stream_address}", f"table={table}",
                *(f"{k}={v}" for k, v in opts.items())]
        self.p = subprocess.Popen(
            [shutil.which("java"), "-cp", os.pathsep.join([classes, cp]),
             "io.kudusql.spark.ChangeStreamProbe", ",".join(columns), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.p.stdout:
            self.lines.put(line.rstrip("\n"))

    def _ask(self, line: str) -> str:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        try:
            out = self.lines.get(timeout=120)
        except queue.Empty:
            raise AssertionError(f"the probe did not answer {line!r} within 120 s") from None
        if out.startswith("ERROR "):
            raise ValueError(out[6:])
        return out

    def initial(self) -> dict:
        return json.loads(self._ask("initial"))

    def latest(self, start: dict) -> dict:
        return json.loads(self._ask("latest " + json.dumps(start, separators=(",", ":"))))

    def partitions(self, start: dict, end: dict) -> int:
        return int(self._ask(f"partitions {json.dumps(start, separators=(',', ':'))} "
                             f"{json.dumps(end, separators=(',', ':'))}"))

    def close(self) -> None:
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
            self.p.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait(timeout=20)


@pytest.fixture(scope="module")
def probe_classes(tmp_path_factory):
    """(the compiled probe's directory, the classpath: connector jar + pyspark's jars)."""
    from kudusql.spark import jvm

    try:
        jar = jvm.jar_path()
        javac = jvm.find_javac()
    except jvm.JvmUnavailable as e:
        pytest.skip(f"no JVM connector here: {e}")
    if shutil.which("java") is None:
        pytest.skip("no java")
    cp = os.pathsep.join([jar, str(jvm.pyspark_jars() / "*")])
    out = tmp_path_factory.mktemp("probe")
    r = subprocess.run([javac, "--release", "17", "-nowarn", "-d", str(out), "-cp", cp,
                        str(PROBE)], capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    return str(out), cp


@pytest.fixture(params=["python", "jvm"])
def driver(request, server):
    """A factory of one path's change stream driver; the JVMs it starts are stopped."""
    made = []

    def make(table: str, columns: list[str], **opts):
        if request.param == "python":
            d = PythonDriver(server, table, columns, **opts)
        else:
            classes, cp = request.getfixturevalue("probe_classes")
            d = JvmDriver(classes, cp, server, table, columns, **opts)
        made.append(d)
        return d
    make.path = request.param
    yield make
    for d in made:
        d.close()


def window_rows(server, table: str, start: dict, end: dict, ts: bool = False
                ) -> list[tuple]:
    """The change rows of the window (start, end] as a driver's tasks read them (`ts`:
    with each row's `_commit_ts`)."""
    st, p = call(server.stream_address, {
        "op": "changes_plan", "table": table, "start": start["ts"], "end": end["ts"],
        "earliest": bool(start.get("earliest")), "columns": ["k", "s"]})
    assert st == 0, p
    rows = []
    for tk in p["tickets"]:
        t, (st, e) = scan(server.stream_address, tk)
        assert st == 0, e
        rows += [(r["k"], r["s"], r["_is_deleted"], *((r["_commit_ts"],) if ts else ()))
                 for r in t.to_pylist()]
    return sorted(rows)


def test_a_trigger_slower_than_half_the_history_is_not_refused(db, server, driver,
                                                                history_age):
    """Triggers T = 2.7 s apart with the history kept H = 5 s (T > H / 2): a write just
    after one trigger, read by the next, and another write before the third. A window that
    ended at its last commit left the next start ~2 T old, below the mark at the third
    trigger: a 22023 with nothing lost (the note of session 38). The window now ends "now"
    (changes_plan), so the start is ~T old and the stream goes on; each write is read once.
    Without the change both paths raise at the third call."""
    tab = "slow_" + driver.path
    db.session().execute(f"CREATE TABLE {tab} (k BIGINT PRIMARY KEY, s TEXT) "
                         "PARTITION BY HASH (k) PARTITIONS 2")
    t = db.catalog.table(tab)
    history_age(5.0)
    d = driver(tab, ["k", "s"], startingOffsets="latest")
    o0 = d.initial()
    db.session().execute(f"INSERT INTO {tab} VALUES (1, 'a')")
    c1 = t.current_timestamp()
    time.sleep(2.7)
    o1 = d.latest(o0)
    second = time.monotonic()
    assert o1["ts"] > c1 and not o1.get("idle")
    assert window_rows(server, tab, o0, o1) == [(1, "a", False)]   # the batch, read now
    time.sleep(max(0.0, second + 2.7 - time.monotonic()))
    db.session().execute(f"INSERT INTO {tab} VALUES (2, 'b')")
    assert t.ancient_history_mark() > c1     # a window ending at c1 would be refused now
    o2 = d.latest(o1)
    assert o2["ts"] >= t.current_timestamp() > o1["ts"]
    assert d.partitions(o1, o2) == 2
    assert window_rows(server, tab, o1, o2) == [(2, "b", False)]


def test_max_rows_per_trigger_bounds_each_window_never_splits_a_commit(db, server, driver):
    """maxRowsPerTrigger: Spark passes the source's default read limit (ReadMaxRows) to
    latestOffset, whose window then ends at the last commit keeping it within N change rows
    (changes_plan "limit_end"), at least one commit: a commit larger than N comes whole.
    Consecutive windows deliver every change once; without the option one window takes
    everything. Without the limit in the drivers, the first window holds all 25 rows."""
    tab = "lim_" + driver.path
    db.session().execute(f"CREATE TABLE {tab} (k BIGINT PRIMARY KEY, s TEXT) "
                         "PARTITION BY HASH (k) PARTITIONS 2")
    d = driver(tab, ["k", "s"], startingOffsets="latest", maxRowsPerTrigger="5")
    whole = driver(tab, ["k", "s"], startingOffsets="latest")
    o0 = d.initial()
    w0 = whole.initial()
    expected = []
    for c in range(4):                      # four commits of 3 rows each ...
        vals = [(c * 10 + i, f"v{c}{i}") for i in range(3)]
        db.session().execute(f"INSERT INTO {tab} VALUES "
                             + ", ".join(f"({k}, '{v}')" for k, v in vals))
        expected += [(k, v, False) for k, v in vals]
    vals = [(100 + i, f"big{i}") for i in range(12)]    # ... one of 12: > 5 on a tablet
    db.session().execute(f"INSERT INTO {tab} VALUES "
                         + ", ".join(f"({k}, '{v}')" for k, v in vals))
    expected += [(k, v, False) for k, v in vals]
    db.session().execute(f"UPDATE {tab} SET s = 'u' WHERE k = 0")   # ... and an update
    expected.append((0, "u", False))
    o, windows = o0, []
    for _ in range(50):
        nxt = d.latest(o)
        if nxt == o:
            break
        windows.append(window_rows(server, tab, o, nxt, ts=True))
        o = nxt
    assert 3 <= len(windows) < 50, windows
    for w in windows:       # within the limit, or one (tablet's) commit taken whole
        assert len(w) <= 5 or len({r[3] for r in w}) == 1, w
    assert sorted(r[:3] for w in windows for r in w) == sorted(expected)
    assert any(len(w) > 5 for w in windows)
    w1 = whole.latest(w0)                   # no option: one window, everything
    assert sorted(window_rows(server, tab, w0, w1)) == sorted(expected)


def test_max_rows_per_trigger_must_be_a_positive_integer(server):
    from kudusql.spark import streaming

    for bad in ("0", "-3", "many"):
        with pytest.raises(ValueError) as e:
            streaming.max_rows_per_trigger(bad)
        assert "22023" in str(e.value) and "maxRowsPerTrigger" in str(e.value)
    assert streaming.max_rows_per_trigger(None) is None
    assert streaming.max_rows_per_trigger(" 7 ") == 7
