"""Timestamp / timestamptz parameters in non-UTC sessions over the wire, against
PostgreSQL 15's recorded answers (tests/wire/tz_param_cases.py says what runs and how
the answers were recorded): asyncpg (binary), psycopg text and binary; Asia/Kolkata (a
half-hour offset), America/New_York (DST) and UTC; the fast paths on and off.

A timestamptz parameter is an instant (an offset in its text, or binary microseconds
since 2000-01-01 UTC); a timestamp parameter ignores an offset written in its text; a
timestamptz stored into a TIMESTAMP column is the session's local time."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.wire.conftest import start_server, stop_server
from tests.wire.tz_param_cases import CLIENTS, EXPECTED, ZONES, scenario


@pytest.fixture(scope="module", params=[True, False], ids=["fast", "ordinary"])
def server(request, tmp_path_factory):
    r = start_server(tmp_path_factory.mktemp("tzp") / "db", fast_paths=request.param)
    yield r
    stop_server(r)


@pytest.fixture(scope="module")
def expected():
    with open(EXPECTED) as f:
        return json.load(f)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("client", CLIENTS)
def test_answers_match_postgres(server, expected, client, zone):
    got = asyncio.run(scenario(client, server.dsn(), zone))
    want = expected[f"{client} {zone}"]
    assert got.keys() == want.keys()
    wrong = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert not wrong, f"{len(wrong)} answers differ from PostgreSQL's: {wrong}"
