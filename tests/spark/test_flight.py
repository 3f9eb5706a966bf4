"""The Arrow Flight endpoint (wire/flight.py) without Spark: one endpoint per unpruned
tablet, one snapshot per flight, per-row write results, scan statistics."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pyarrow.flight as fl
import pytest

from engine.tablet import ColumnPredicate as P
from wire import flight


@pytest.fixture(scope="module")
def client(db, server):
    db.session().execute(
        "CREATE TABLE f (k INT NOT NULL, g STRING, v DOUBLE, PRIMARY KEY (k)) "
        "PARTITION BY HASH (k) PARTITIONS 4")
    c = fl.connect(server.location)
    yield c
    c.close()


def put(c, table, rows: pa.Table, mode="insert") -> dict:
    w, r = c.do_put(flight.command(table=table, mode=mode), rows.schema)
    w.write_table(rows)
    w.done_writing()
    out = json.loads(r.read().to_pybytes())
    w.close()
    return out


def rows(n0, n1, v=1.0):
    return pa.table({"k": pa.array(range(n0, n1), pa.int64()),
                     "g": [f"g{i % 5}" for i in range(n0, n1)], "v": [v] * (n1 - n0)})


def read(c, info) -> pa.Table:
    return pa.concat_tables([c.do_get(ep.ticket).read_all() for ep in info.endpoints])


def action(c, kind, body=None):
    res = list(c.do_action(fl.Action(kind, json.dumps(body).encode())))
    return json.loads(res[0].body.to_pybytes())


def test_put_reports_row_errors(client):
    r = put(client, "f", pa.concat_tables([rows(0, 1000), rows(10, 12)]))
    assert (r["rows"], r["applied"], r["failed"]) == (1002, 1000, 2)
    assert r["failed_by_code"] == {"ALREADY_PRESENT": 2}
    assert [(e["index"], e["key"]) for e in r["errors"]] == [(1000, [10]), (1001, [11])]
    assert put(client, "f", rows(10, 12, 2.0), mode="upsert")["failed"] == 0


def test_one_endpoint_per_tablet_and_pushdown_stats(client):
    action(client, "clear_stats")
    info = client.get_flight_info(flight.command(table="f", columns=["k", "v"]))
    assert len(info.endpoints) == 4
    assert read(client, info).num_rows == 1000
    info = client.get_flight_info(flight.command(table="f", columns=["v"],
                                                 predicates=[P.equal("k", 11)]))
    assert len(info.endpoints) == 1  # hash pruning: 3 of 4 tablets never touched
    assert read(client, info).to_pylist() == [{"v": 2.0}]
    info = client.get_flight_info(flight.command(table="f", columns=["k"],
                                                 predicates=[P.less("k", 100),
                                                             P.equal("g", "g1")]))
    assert sorted(read(client, info).column("k").to_pylist()) == list(range(1, 100, 5))
    full, point, filtered = action(client, "stats")
    assert (full["tablets_read"], full["rows_returned"]) == (4, 1000)
    assert (point["tablets_pruned"], point["tablets_read"], point["rows_returned"]) == (3, 1, 1)
    assert point["rows_scanned"] < 1000
    assert filtered["rows_returned"] == 20


def test_a_flight_reads_one_snapshot(client):
    info = client.get_flight_info(flight.command(table="f", columns=["k"]))
    put(client, "f", rows(5000, 5100))  # after planning: invisible to this flight
    assert read(client, info).num_rows == 1000
    ts = json.loads(info.app_metadata)["snapshot"]
    again = client.get_flight_info(flight.command(table="f", columns=["k"], snapshot=ts))
    assert read(client, again).num_rows == 1000
    assert read(client, client.get_flight_info(
        flight.command(table="f", columns=["k"]))).num_rows == 1100


def test_errors_are_flight_errors(client):
    with pytest.raises(fl.FlightServerError, match="does not exist"):
        client.get_flight_info(flight.command(table="nope"))
    with pytest.raises(fl.FlightServerError, match="ColumnNotFound|column"):
        client.get_flight_info(flight.command(table="f", columns=["zz"]))
    assert action(client, "bind", {"table": "f", "predicates": [
        flight.predicate_to_json(P.equal("k", "x")),
        flight.predicate_to_json(P.in_list("g", ["g1", "g2"]))]}) == [False, True]


def test_tagged_literals_round_trip():
    for v in (dt.date(2026, 1, 2), dt.datetime(2026, 1, 2, 3, 4, 5, 6),
              decimal.Decimal("12.34"), b"\x00\xff", 5, "s", None):
        assert flight.value_from_json(json.loads(json.dumps(flight.value_to_json(v)))) == v
