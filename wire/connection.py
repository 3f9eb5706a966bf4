"""One client connection: the asyncio adapter around the protocol core (wire/backend.py).

    bytes --reader--> FrontendDecoder (wire/protocol.py) --message--> Backend.handle
          <--writer-- Backend.data_to_send() <--------------- effects (wire/effects.py)

This module is the only part of a connection that knows asyncio and the socket. It reads
what the client sent into the sans-I/O decoder, hands each decoded message to the core,
performs the effects the core returns and sends their values back in, and writes the
bytes the core produced: before it waits for input (a client that waits is never left
waiting) and at every FLUSH, awaiting the transport's drain (back-pressure).

Effects, as performed here:
- Call: `loop.run_in_executor(server.pool, fn, *args)`. While a statement runs
  (`Backend.running`) the socket is watched meanwhile (`_watching`): when the client goes
  away (EOF, reset) the statement is canceled, stops at its next check (~100 ms of work,
  planner/guard.py) and `Closed` is thrown into the core; bytes that arrive meanwhile
  (pipelined messages) go to the decoder for later.
- Spawn / Join: a pool call started now, awaited later (results' double buffering).
- RECEIVE / Unread: the next message (from the pushback queue, then the decoder, reading
  the socket when it has nothing); a message put back goes to the head of the queue.
- START_TLS: 'S', then `StreamWriter.start_tls`; bytes the client sent before the
  upgrade are refused (FATAL 08P01).
- Timer / CancelTimer: `loop.call_later(seconds, backend.cancel, "timeout")`.
An exception raised while performing an effect is thrown into the core where it yielded,
so the core's try/finally blocks run as an `await`'s would.

Lifecycle: `run()` serves until Terminate, EOF, or an error that ends the connection:
`Fatal` and a fatal ProtocolViolation send FATAL and close; an unexpected exception is
logged and sent as FATAL XX000; a closed or broken socket just ends it. Either way the
server unregisters it and its portals are released. `cancel(reason)` (the server's, on
the loop thread) interrupts the running statement.

wire/fastpath.py's hooks. The fast paths take the adapter (`on_bind(conn, bind)`, called
for a Bind outside a failed pipeline before the core sees it) and use: `statements`,
`portals`, `tx`, `session`, `config`, `batch_off`, `pushback`, `decoder`, `send`,
`flush`, `_read_more`, `_bind_params`, `_blocking`, `_begin_statement`,
`_end_statement`, `_drop_portals` and `_on_sync`. They keep the names and the arguments
they had when this module was the whole connection; the state behind them is the core's.
The fast paths living on the adapter, not in the sans-I/O core, is a stated exception
(wire/fastpath.py's docstring says why): keep these members' meaning when the core
changes.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import TYPE_CHECKING

from wire import protocol as P
from wire.backend import Backend, Host
from wire.effects import (
    Call,
    CancelTimer,
    Closed,
    Fatal,
    Flush,
    Join,
    Receive,
    Spawn,
    StartTLS,
    Timer,
    Unread,
)
from wire.extended_query import bind_params
from wire.fastpath import on_bind

if TYPE_CHECKING:
    from wire.portal import PreparedStatement

__all__ = ["Connection", "Host", "Fatal", "Closed"]

log = logging.getLogger("kudusql.wire")


class Connection:
    def __init__(self, server: Host, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter):
        self.server = server
        self.config = server.config
        self.reader, self.writer = reader, writer
        self.decoder = P.FrontendDecoder(self.config.max_message_bytes)
        self.pushback: collections.deque = collections.deque()
        pid, secret = server.new_backend_key()
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.backend = Backend(server, self.config, pid, secret, conn=self, peer=self.peer)

    # -- what the server and the session factory read -------------------------------------
    @property
    def pid(self) -> int:
        return self.backend.pid

    @property
    def secret(self) -> int:
        return self.backend.secret

    @property
    def user(self) -> str:
        return self.backend.user

    @property
    def database(self) -> str:
        return self.backend.database

    @property
    def settings(self):
        return self.backend.settings

    def prepared_statements(self) -> list[dict]:
        return self.backend.prepared_statements()

    def cancel(self, reason: str = "user") -> None:
        """Interrupt the running statement (called on the loop thread)."""
        self.backend.cancel(reason)

    # -- the core's state, as wire/fastpath.py reads and writes it ------------------------
    @property
    def session(self):
        return self.backend.session

    @property
    def tx(self):
        return self.backend.tx

    @property
    def statements(self) -> dict[str, PreparedStatement]:
        return self.backend.statements

    @property
    def portals(self):
        return self.backend.portals

    @property
    def batch_off(self) -> bool:
        return self.backend.batch_off

    @batch_off.setter
    def batch_off(self, value: bool) -> None:
        self.backend.batch_off = value

    def send(self, data: bytes) -> None:
        self.backend.send(data)

    def _drop_portals(self, which) -> None:
        self.backend.drop_portals(which)

    def _on_sync(self) -> None:
        self.backend.on_sync()

    async def _bind_params(self, stmt, msg: P.Bind) -> list:
        return await self._drive(bind_params(self.backend, stmt, msg))

    def _begin_statement(self):
        ms = self.backend.begin_statement()
        if ms > 0:
            return asyncio.get_running_loop().call_later(ms / 1000, self.backend.cancel,
                                                         "timeout")
        return None

    def _end_statement(self, timer) -> None:
        if timer is not None:
            timer.cancel()
        self.backend.running = False

    # -- I/O --------------------------------------------------------------------------------
    async def flush(self) -> None:
        be = self.backend
        if be.out:
            self.writer.write(be.data_to_send())
        await self.writer.drain()

    async def next_message(self) -> P.Message | None:
        """The next frontend message (None: the client closed the connection). Output is
        flushed before waiting for input, so a client that waits is never left waiting."""
        if self.pushback:
            msg = self.pushback.popleft()
            if isinstance(msg, P.ProtocolViolation):   # met while wire.fastpath looked ahead
                raise msg
            return msg
        while True:
            msg = self.decoder.next()
            if msg is not None:
                return msg
            if self.backend.out:
                await self.flush()
            if not await self._read_more():
                return None

    async def _read_more(self) -> bool:
        """Read what the client sent next into the decoder; False once it has closed the
        connection (EOF or a socket error)."""
        try:
            data = await self.reader.read(self.config.read_bytes)
        except (ConnectionError, OSError):
            return False
        if not data:
            return False
        self.decoder.feed(data)
        return True

    # -- lifecycle --------------------------------------------------------------------------
    async def run(self) -> None:
        be = self.backend
        try:
            await self._serve()
        except (Fatal, P.ProtocolViolation) as e:
            await self._fatal(e.message, e.sqlstate)
        except (ConnectionError, OSError, Closed, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("connection %s (pid %d) failed", self.peer, be.pid)
            await self._fatal("internal error; see the server log", "XX000")
        finally:
            self.server.unregister(self)
            be.close()
            with contextlib.suppress(Exception):   # the transport may be broken already
                self.writer.close()

    async def _fatal(self, message: str, sqlstate: str) -> None:
        with contextlib.suppress(Exception):   # the peer may be gone already
            self.backend.fatal(message, sqlstate)
            await self.flush()

    async def _serve(self) -> None:
        be = self.backend
        while not be.closed:
            try:
                msg = await self.next_message()
            except P.ProtocolViolation as e:
                if e.fatal or be.phase != "ready":
                    raise
                be.violation(e)
                continue
            if msg is None:
                return
            if type(msg) is P.Bind and not be.ext_error and not be.batch_off and \
                    await on_bind(self, msg):
                continue
            effects = be.handle(msg)
            if effects:
                await self._drive(effects)

    # -- effects ----------------------------------------------------------------------------
    async def _drive(self, effects):
        """Perform `effects` (a tuple, or the core's generator) to the end; returns the
        generator's return value."""
        if type(effects) is tuple:
            for effect in effects:
                await self._perform(effect)
            return None
        gen = effects
        try:
            effect = next(gen)
            while True:
                try:
                    value = await self._perform(effect)
                except BaseException as e:  # noqa: BLE001 - raised where the core yielded
                    effect = gen.throw(e)
                else:
                    effect = gen.send(value)
        except StopIteration as stop:
            return stop.value

    async def _perform(self, effect):
        t = type(effect)
        if t is Call:
            return await self._blocking(effect.fn, *effect.args)
        if t is Flush:
            return await self.flush()
        if t is Spawn:
            return asyncio.ensure_future(self._blocking(effect.fn))
        if t is Join:
            return await effect.handle
        if t is Receive:
            return await self.next_message()
        if t is Unread:
            self.pushback.append(effect.message)
            return None
        if t is Timer:
            return asyncio.get_running_loop().call_later(effect.seconds,
                                                         self.backend.cancel, "timeout")
        if t is CancelTimer:
            effect.handle.cancel()
            return None
        if t is StartTLS:
            if self.decoder.buffered():
                raise Fatal("received unencrypted data after SSL request", "08P01")
            self.writer.write(b"S")
            await self.writer.drain()
            await self.writer.start_tls(self.server.ssl_context)
            return None
        raise TypeError(f"unknown effect {effect!r}")

    # -- blocking work ----------------------------------------------------------------------
    async def _blocking(self, fn, *args):
        fut = asyncio.get_running_loop().run_in_executor(self.server.pool, fn, *args)
        if not self.backend.running:
            return await fut
        return await self._watching(fut)

    async def _watching(self, fut):
        """Await a running statement's pool call while watching the socket: when the
        client goes away (EOF, reset) the statement is canceled, stops at its next check
        and the connection ends (Closed). Bytes that arrive meanwhile (pipelined messages)
        go to the decoder for later."""
        watch = asyncio.ensure_future(self._peer_gone())
        try:
            done, _ = await asyncio.wait({fut, watch}, return_when=asyncio.FIRST_COMPLETED)
            if fut in done or not watch.result():
                return await fut
            self.backend.cancel("connection")
            t0 = asyncio.get_running_loop().time()
            with contextlib.suppress(Exception):      # the statement's end is not news
                await fut
            loop_time = asyncio.get_running_loop().time()
            log.info("connection %s (pid %d) lost during a statement; the statement "
                     "stopped after %.0f ms", self.peer, self.pid, (loop_time - t0) * 1000)
            raise Closed()
        finally:
            if not watch.done():
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watch         # one reader at a time: let this one finish first

    async def _peer_gone(self) -> bool:
        """True once the client has closed the connection; False if it sent so much while
        the statement ran that watching stops (the decoder keeps what it sent)."""
        while self.decoder.buffered() < 4 * self.config.read_bytes:
            if not await self._read_more():
                return True
        return False
