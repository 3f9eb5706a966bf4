"""Writes the wire's hot cases acknowledged survive kill -9 (wire/fastpath.py `key_write`,
`row_insert`): a real `kudusql serve` takes prepared single-row INSERTs and UPDATEs by key
from several asyncpg connections (the shapes those cases answer: tests/wire/
test_fastpath_writes.py), is killed with SIGKILL while they run, and is started again on
the same data directory. Every INSERT it acknowledged must be there, and every key must
hold at least the increments acknowledged for it (at most one more: the one in flight).

A kill -9 keeps the OS page cache, so this checks that a reply comes after the write is
applied and logged (recovered by WAL replay); that the fsync precedes the reply is the
`Durable` effect's order (wire/effects.py), which a process kill cannot observe."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

from tests.wire.real_server import RealServer

asyncpg = pytest.importorskip("asyncpg")

CONNS = 6
KEYS = 20              # per connection, updated in turn


async def _writers(port: int, acked_inserts: list, acked_updates: dict) -> None:
    async def one(wid: int) -> None:
        c = await asyncpg.connect(host="127.0.0.1", port=port, user="kudusql",
                                  database="kudusql")
        ins = await c.prepare("INSERT INTO hot (k, v, s) VALUES ($1, $2, $3)")
        upd = await c.prepare("UPDATE hot SET v = v + 1 WHERE k = $1")
        base = (wid + 1) * 1_000_000
        for j in range(KEYS):                       # the keys this connection updates
            await ins.fetch(base + j, 0, "seed")
            acked_inserts.append(base + j)
        i = 0
        try:
            while True:
                if i % 2:
                    await ins.fetch(base + KEYS + i, i, f"row{i}")
                    acked_inserts.append(base + KEYS + i)
                else:
                    k = base + (i // 2) % KEYS
                    await upd.fetch(k)
                    acked_updates[k] = acked_updates.get(k, 0) + 1
                i += 1
        except (asyncpg.PostgresConnectionError, ConnectionError, OSError,
                asyncpg.InterfaceError):
            return                                  # the server was killed
    await asyncio.gather(*[one(w) for w in range(CONNS)])


def test_acknowledged_hot_writes_survive_kill_9(tmp_path):
    data = str(tmp_path / "data")
    server = RealServer(data)
    try:
        async def setup():
            c = await asyncpg.connect(host="127.0.0.1", port=server.port, user="kudusql",
                                      database="kudusql")
            await c.execute("CREATE TABLE hot (k BIGINT NOT NULL, v BIGINT, s TEXT, "
                            "PRIMARY KEY (k)) PARTITION BY HASH (k) PARTITIONS 3")
            await c.close()
        asyncio.run(setup())
        acked_inserts: list = []
        acked_updates: dict = {}

        def kill_later():
            deadline = time.monotonic() + 60
            while len(acked_inserts) + sum(acked_updates.values()) < 600 and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(server.pid, signal.SIGKILL)
        killer = threading.Thread(target=kill_later, daemon=True)
        killer.start()
        asyncio.run(_writers(server.port, acked_inserts, acked_updates))
        killer.join(30)
        server.proc.wait(30)
    finally:
        server.stop()
    assert len(acked_inserts) > 100 and sum(acked_updates.values()) > 100

    with RealServer(data) as again:
        async def read():
            c = await asyncpg.connect(host="127.0.0.1", port=again.port, user="kudusql",
                                      database="kudusql")
            rows = await c.fetch("SELECT k, v FROM hot")
            await c.close()
            return {r["k"]: r["v"] for r in rows}
        found = asyncio.run(read())
    missing = [k for k in acked_inserts if k not in found]
    assert not missing, f"{len(missing)} acknowledged INSERTs lost, e.g. {missing[:5]}"
    for k, n in acked_updates.items():
        assert n <= found[k] <= n + 1, (k, n, found[k])
