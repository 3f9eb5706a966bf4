"""The server's WAL sync threads (wire/server.py `WalSync`): a batch of writes queued while
the threads were busy is made durable with one wait per log - the calls naming their WAL
position (`durable_at`, engine/tablet/tablet.py `finish_op`) then run without waiting -
and resolved on the event loop; a failed fsync reaches every writer as its error; a stop
ends every thread, however the stop markers were taken."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from engine import errors, fs
from engine.consensus.log import WRITE, Log, LogEntry
from wire.server import WalSync


def _log(path) -> Log:
    log = Log(str(path), "commit")
    log.open_for_append(1)
    return log


def _append(log: Log, index: int) -> None:
    log.append(LogEntry(0, index, index, WRITE, b"row %d" % index))


class _CountingLog:
    """A Log whose waits are recorded: (thread, index) per `wait_durable` call."""

    def __init__(self, log: Log):
        self.log = log
        self.waits: list = []

    def wait_durable(self, index: int, writers: int = 1, delay: bool = True) -> None:
        self.waits.append((threading.get_ident(), index))
        self.log.wait_durable(index, writers, delay)


def _durable_finish(log, index: int, ran: list):
    """A finishing call as Tablet.finish_op makes one: it waits for `index` itself (not
    recorded), and names its position."""
    def finish():
        log.log.wait_durable(index)
        ran.append((index, threading.get_ident()))
        return index
    finish.durable_at = (log, index)
    return finish


def _run(coro):
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def test_a_batch_waits_once_per_log(tmp_path):
    logs = [_CountingLog(_log(tmp_path / "a")), _CountingLog(_log(tmp_path / "b"))]
    ws = WalSync(threads=1)
    gate = threading.Event()
    ran: list = []

    async def main():
        loop = asyncio.get_running_loop()
        blocker = ws.submit(loop, lambda: gate.wait(10))   # holds the one thread
        await asyncio.sleep(0.05)
        futs = []
        for i in range(1, 7):                    # appended and queued meanwhile
            log, index = logs[i % 2], (i + 1) // 2
            _append(log.log, index)
            futs.append(ws.submit(loop, _durable_finish(log, index, ran)))
        before = [log.log.fsyncs for log in logs]
        gate.set()
        assert await blocker is True
        return await asyncio.gather(*futs), before

    try:
        got, before = _run(main())
    finally:
        ws.stop()
    assert got == [1, 1, 2, 2, 3, 3]
    # the batch: one wait per log, for its highest index, and one fsync each
    assert [[i for _, i in log.waits] for log in logs] == [[3], [3]]
    assert [log.log.fsyncs - b for log, b in zip(logs, before)] == [1, 1]
    assert sorted(i for i, _ in ran) == [1, 1, 2, 2, 3, 3]
    assert len({t for _, t in ran} | {t for log in logs for t, _ in log.waits}) == 1
    for log in logs:
        log.log.close()


def test_durable_writes_do_not_wait_for_a_slow_call_of_their_batch(tmp_path):
    """A call naming no WAL position (a write over several tablets waits for itself)
    taken in the same batch as durable key writes: theirs are answered before it ends."""
    log = _CountingLog(_log(tmp_path / "wal"))
    ws = WalSync(threads=1)
    gate, slow_gate = threading.Event(), threading.Event()
    ran: list = []

    async def main():
        loop = asyncio.get_running_loop()
        blocker = ws.submit(loop, lambda: gate.wait(10))
        await asyncio.sleep(0.05)
        slow = ws.submit(loop, lambda: slow_gate.wait(10))   # queued first
        _append(log.log, 1)
        fast = ws.submit(loop, _durable_finish(log, 1, ran))
        gate.set()
        await blocker
        got = await asyncio.wait_for(fast, 5)
        still_waiting = not slow.done()
        slow_gate.set()
        return got, still_waiting, await slow

    try:
        got, still_waiting, slow_result = _run(main())
    finally:
        slow_gate.set()
        ws.stop()
    assert (got, still_waiting, slow_result) == (1, True, True)
    log.log.close()


def test_failed_fsync_is_each_writers_error(tmp_path):
    log = _CountingLog(_log(tmp_path / "wal"))
    ws = WalSync(threads=1)
    gate = threading.Event()
    ran: list = []

    async def main():
        loop = asyncio.get_running_loop()
        blocker = ws.submit(loop, lambda: gate.wait(10))
        await asyncio.sleep(0.05)
        futs = []
        for i in (1, 2, 3):
            _append(log.log, i)
            futs.append(ws.submit(loop, _durable_finish(log, i, ran)))
        fs.inject_eio(str(tmp_path / "wal"))
        try:
            gate.set()
            await blocker
            return await asyncio.gather(*futs, return_exceptions=True)
        finally:
            fs.inject_eio(None)

    try:
        outs = _run(main())
    finally:
        ws.stop()
    assert len(outs) == 3 and all(isinstance(o, errors.IOFailure) for o in outs), outs
    assert ran == []                # nothing reported durable
    log.log.close()


@pytest.mark.parametrize("threads", [1, 4])
def test_stop_ends_every_thread(threads):
    ws = WalSync(threads=threads)

    async def main():
        return await ws.submit(asyncio.get_running_loop(), lambda: 7)

    assert _run(main()) == 7
    started = list(ws._threads)
    assert len(started) == threads
    t0 = time.time()
    ws.stop()
    assert time.time() - t0 < 5
    assert not any(t.is_alive() for t in started)


def test_call_naming_no_wal_position_runs_on_the_pool(tmp_path):
    """With the server's statement pool, a call that waits for itself (no `durable_at`)
    runs there and never holds up the sync thread's key writes."""
    import concurrent.futures as cf
    pool = cf.ThreadPoolExecutor(2, thread_name_prefix="test-pool")
    log = _CountingLog(_log(tmp_path / "wal"))
    ws = WalSync(pool)
    slow_gate = threading.Event()
    ran: list = []

    async def main():
        loop = asyncio.get_running_loop()
        slow = ws.submit(loop, lambda: (slow_gate.wait(10),
                                        threading.current_thread().name)[1])
        _append(log.log, 1)
        got = await asyncio.wait_for(ws.submit(loop, _durable_finish(log, 1, ran)), 5)
        still_waiting = not slow.done()
        slow_gate.set()
        return got, still_waiting, await slow

    try:
        got, still_waiting, where = _run(main())
    finally:
        slow_gate.set()
        ws.stop()
        pool.shutdown()
    assert (got, still_waiting) == (1, True)
    assert where.startswith("test-pool")
    log.log.close()


def test_commit_delay_takes_the_writes_queued_meanwhile_into_the_batch(tmp_path):
    """A batch of more than `commit_siblings` writes waits the commit delay first; a
    write queued during it joins the batch: one wait, for the highest index, covers all
    three (one fsync). A later batch of one write (a lone client) is not delayed."""
    log = _CountingLog(_log(tmp_path / "wal"))
    ws = WalSync(threads=1, commit_delay_us=300_000, commit_siblings=1)
    gate = threading.Event()
    ran: list = []

    async def main():
        loop = asyncio.get_running_loop()
        blocker = ws.submit(loop, lambda: gate.wait(10))    # a batch of one: no delay
        await asyncio.sleep(0.05)
        futs = []
        for i in (1, 2):
            _append(log.log, i)
            futs.append(ws.submit(loop, _durable_finish(log, i, ran)))
        before = log.log.fsyncs
        gate.set()
        assert await blocker is True
        for _ in range(1000):                   # the batch of two waits the delay
            if ws.delays:
                break
            await asyncio.sleep(0.005)
        assert ws.delays == 1 and log.waits == []
        _append(log.log, 3)
        futs.append(ws.submit(loop, _durable_finish(log, 3, ran)))
        got = await asyncio.gather(*futs)
        fsyncs = log.log.fsyncs - before
        _append(log.log, 4)                     # alone: no delay
        got.append(await ws.submit(loop, _durable_finish(log, 4, ran)))
        return got, fsyncs

    try:
        got, fsyncs = _run(main())
    finally:
        gate.set()
        ws.stop()
    assert got == [1, 2, 3, 4]
    assert [i for _, i in log.waits] == [3, 4] and fsyncs == 1
    assert ws.delays == 1
    log.log.close()


def test_serve_takes_the_commit_delay_settings():
    """`kudusql serve --commit-delay/--commit-siblings` reach the engine configuration the
    database is opened with, and the server's WAL sync thread; unset, the defaults."""
    from types import SimpleNamespace

    from engine.config import TabletConfig
    from kudusql.cli import _parser
    from wire.server import ConfigError, Server, ServerConfig, check_config, \
        tablet_config

    args = _parser().parse_args(["serve", "--commit-delay", "150", "--commit-siblings", "3"])
    assert (args.commit_delay, args.commit_siblings) == (150, 3)
    tc = tablet_config(ServerConfig(commit_delay_us=150, commit_siblings=3))
    assert (tc.wal_commit_delay_us, tc.wal_commit_siblings) == (150, 3)
    assert tablet_config(ServerConfig()) is None
    with pytest.raises(ConfigError):
        check_config(ServerConfig(commit_delay_us=-1))
    db = SimpleNamespace(catalog=SimpleNamespace(
        config=TabletConfig(wal_commit_delay_us=70, wal_commit_siblings=4)))
    server = Server(db, ServerConfig(port=0))
    try:
        assert (server.wal_sync._delay, server.wal_sync._siblings) == (70e-6, 4)
    finally:
        server.pool.shutdown()
