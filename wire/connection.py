"""One client connection: the asyncio Protocol around the protocol core (wire/backend.py).

    buffer_updated(n) -> Backend.feed -> Backend.handle_next (frames scanned in the
    core's receive buffer; hot cases answered there, wire/fastpath.py) -> effects
    (wire/effects.py) performed here -> Backend.data_to_send() -> transport.write

This module is the only part of a connection that knows asyncio and the socket. It is an
`asyncio.Protocol`: no StreamReader, no task per connection or per operation. Bytes that
arrive go into the core's buffer and, while the core is idle, are handled at once, as
many complete messages as there are; what the core produced is written once at the end
of the burst (one transport write per burst, whatever the number of Syncs in it), before
anything is waited for, and whenever the pending output reaches `flush_bytes`.

Effects are performed by a small driver of the core's generators (`_advance`), without a
coroutine: an effect that can be performed now (FLUSH with the transport accepting
writes, RECEIVE of a message already buffered, Unread, Timer, CancelTimer, Spawn, a Join
of a finished call) is performed inline and the generator goes on; one that must wait
parks the generator (`_gen`) and a callback resumes it:
- Call: `loop.run_in_executor(server.pool, fn, *args)`; its future's callback resumes.
- Durable(finish): `finish` runs on the server's WAL sync thread (wire/server.py
  `WalSync`, which takes every write queued when it wakes and waits once per WAL for
  them all), which resolves the future on the loop (`call_soon_threadsafe`): the fsync
  wait of a write applied on the loop never blocks it, and the writes of all
  connections waiting together share their fsyncs.
- RECEIVE with nothing buffered: the next `buffer_updated` resumes (None on EOF).
- FLUSH while the transport has paused writing: `resume_writing` resumes (back-pressure:
  a slow client slows the sender).
- START_TLS: 'S', then `loop.start_tls` (the one task, once per connection); bytes the
  client sent before the upgrade are refused (FATAL 08P01).
- Timer / CancelTimer: `loop.call_later(seconds, backend.cancel, "timeout")`.
An exception raised while performing an effect is thrown into the core where it yielded,
so the core's try/finally blocks run as an `await`'s would. While the core is parked,
input is only buffered (reading pauses past `2 * read_bytes`, resumes as it drains).

A batch's look-ahead (wire/fastpath.py) may ask for more input before it decides; the
adapter then waits for more bytes as long as they keep coming within READ_WAIT, and sets
`Backend.look_ahead_over` when they stop.

A client that goes away (connection_lost, or EOF) while a statement runs
(`Backend.running`) cancels it: it stops at its next check (~100 ms of work,
planner/guard.py) and `Closed` is thrown into the core when its call returns (logged as
"lost during a statement"). No watcher task: the Protocol hears of it by itself.

Lifecycle: the connection serves until Terminate, EOF, or an error that ends it: `Fatal`
and a fatal ProtocolViolation send FATAL and close; an unexpected exception is logged and
sent as FATAL XX000; a closed or broken socket just ends it. Either way the server
unregisters it and its portals are released (`_finish`, once; `done` is then set).
`cancel(reason)` (the server's, on the loop thread) interrupts the running statement.
"""
from __future__ import annotations

import asyncio
import logging
import socket

from wire import protocol as P
from wire.backend import Backend, Host
from wire.effects import (
    NEED_INPUT,
    Call,
    CancelTimer,
    Closed,
    Durable,
    Fatal,
    Flush,
    Join,
    Receive,
    Spawn,
    StartTLS,
    Timer,
    Unread,
)
from wire.fastpath import READ_WAIT

__all__ = ["Connection", "Host", "Fatal", "Closed"]

log = logging.getLogger("kudusql.wire")

# what a parked generator waits for
_INPUT, _FUTURE, _DRAIN, _TLS = "input", "future", "drain", "tls"


class Connection(asyncio.BufferedProtocol):
    def __init__(self, server: Host):
        self.server = server
        self.config = server.config
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.backend: Backend | None = None
        self.peer = ""
        self.done = self.loop.create_future()   # set when the connection has ended
        self._gen = None                 # the core's generator, parked
        self._waiting: str | None = None
        self._eof = False                # the client sent EOF
        self._lost = False               # the connection is gone (or the client left)
        self._lost_at = 0.0
        self._closing = False
        self._finished = False
        self._write_paused = False
        self._read_paused = False
        self._look_timer: asyncio.TimerHandle | None = None
        self._read_limit = 2 * self.config.read_bytes
        # the socket is read into this one buffer (BufferedProtocol: no allocation of a
        # read_bytes-sized bytes object per read); what arrived is copied out at once
        self._rview = memoryview(bytearray(self.config.read_bytes))

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

    def abort(self) -> None:
        """Drop the connection now (server shutdown)."""
        if self.transport is not None:
            self.transport.abort()

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        pid, secret = self.server.new_backend_key()
        self.backend = Backend(self.server, self.config, pid, secret, conn=self,
                               peer=self.peer)
        self.server.opened(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._rview

    def buffer_updated(self, nbytes: int) -> None:
        """`nbytes` arrived in the read buffer: copied out into the core's input, then
        handled at once while the core is idle. (A BufferedProtocol, also under TLS:
        asyncio never calls `data_received`.)"""
        be = self.backend
        be.feed(self._rview[:nbytes].tobytes())
        if self._gen is None:
            self._process()
        elif self._waiting is _INPUT:
            self._resume_input()
        if not self._read_paused and (self._gen is not None or self._write_paused) and \
                be.buffered() > self._read_limit:
            self._pause_reading()

    def eof_received(self) -> bool:
        self._eof = True
        be = self.backend
        if self._gen is None:
            be.look_ahead_over = True
            self._process()
        elif self._waiting is _INPUT:
            self._resume_input()
        elif be.running:
            self._client_gone()
        return True         # half-closed: the replies to what came before EOF still go out

    def connection_lost(self, exc) -> None:
        if not self._lost:
            self._client_gone()
        if self._waiting is _INPUT:
            self._resume_input()
        elif self._waiting is _DRAIN:
            self._resume(ConnectionResetError("connection lost"))
        elif self._gen is None:
            self._finish()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._waiting is _DRAIN:
            self._resume(None)
        elif self._gen is None and not self._lost:
            self._process()

    # -- the burst loop -------------------------------------------------------------------------
    def _process(self) -> None:
        """Handle buffered input until it runs out or the core parks; then write."""
        be = self.backend
        try:
            while self._gen is None:
                if be.closed or self._closing:
                    self._close()
                    return
                if self._write_paused or self._lost:
                    break
                if be.rpos >= len(be.inbuf) and not be.pushback and not self._eof:
                    break           # all input handled: what `handle_next` would say
                effects = be.handle_next()
                if effects is NEED_INPUT:
                    if be.looking_ahead:
                        be.looking_ahead = False
                        if self._eof:
                            be.look_ahead_over = True
                            continue
                        self._arm_look_ahead()
                    elif self._eof:
                        self._close()
                        return
                    break
                if effects:
                    if type(effects) is tuple:
                        for e in effects:       # FLUSH (Sync, Flush): written below
                            if type(e) is not Flush:
                                raise TypeError(f"unexpected effect {e!r}")
                            if be.out_bytes >= self.config.flush_bytes:
                                self._write_out()
                    else:
                        self._advance(effects, None, None)
        except BaseException as e:  # noqa: BLE001 - ends the connection (see _fail)
            self._fail(e)
            return
        self._write_out()
        if self._read_paused and be.buffered() < self.config.read_bytes:
            self._read_paused = False
            self.transport.resume_reading()
        if self._lost and self._gen is None:
            self._finish()

    def _arm_look_ahead(self) -> None:
        if self._look_timer is not None:
            self._look_timer.cancel()
        self._look_timer = self.loop.call_later(READ_WAIT, self._look_ahead_over)

    def _look_ahead_over(self) -> None:
        self._look_timer = None
        if self._gen is None and not self._finished:
            self.backend.look_ahead_over = True
            self._process()

    def _write_out(self) -> None:
        be = self.backend
        if be.out and not self._lost:
            self.transport.write(be.data_to_send())
        elif be.out:
            be.data_to_send()

    def _pause_reading(self) -> None:
        if not self._read_paused and not self._lost:
            self._read_paused = True
            self.transport.pause_reading()

    # -- the effect driver --------------------------------------------------------------------
    def _advance(self, gen, value, exc) -> None:
        """Drive the core's generator `gen`, sending `value` (or throwing `exc`) in, until
        it ends or parks on an effect that must wait. Exceptions it raises propagate."""
        be = self.backend
        loop = self.loop
        while True:
            try:
                effect = gen.send(value) if exc is None else gen.throw(exc)
            except StopIteration:
                return
            value = exc = None
            t = type(effect)
            if t is Flush:
                if be.out_bytes >= self.config.flush_bytes:
                    self._write_out()
                if self._write_paused:
                    self._park(gen, _DRAIN)
                    return
            elif t is Call:
                self._wait(gen, loop.run_in_executor(self.server.pool, effect.fn,
                                                     *effect.args))
                return
            elif t is Receive:
                try:
                    value = be.next_message()
                except P.ProtocolViolation as e:
                    exc = e
                    continue
                if value is None and not (self._eof or self._lost):
                    self._write_out()
                    if self._read_paused:
                        self._read_paused = False
                        self.transport.resume_reading()
                    self._park(gen, _INPUT)
                    return
            elif t is Durable:
                self._wait(gen, self.server.wal_sync.submit(loop, effect.finish))
                return
            elif t is Spawn:
                value = loop.run_in_executor(self.server.pool, effect.fn)
            elif t is Join:
                fut = effect.handle
                if not fut.done():
                    self._wait(gen, fut)
                    return
                try:
                    value = fut.result()
                except BaseException as e:  # noqa: BLE001 - thrown in where it yielded
                    exc = e
            elif t is Unread:
                be.unread(effect.message)
            elif t is Timer:
                value = loop.call_later(effect.seconds, be.cancel, "timeout")
            elif t is CancelTimer:
                effect.handle.cancel()
            elif t is StartTLS:
                self._park(gen, _TLS)
                loop.create_task(self._start_tls())
                return
            else:
                exc = TypeError(f"unknown effect {effect!r}")

    def _park(self, gen, what: str) -> None:
        self._gen, self._waiting = gen, what

    def _wait(self, gen, fut) -> None:
        """Park `gen` until `fut` is done; what is pending is written first."""
        self._write_out()
        self._park(gen, _FUTURE)
        fut.add_done_callback(self._future_done)

    def _future_done(self, fut) -> None:
        if fut.cancelled():
            value, exc = None, asyncio.CancelledError()
        else:
            exc = fut.exception()
            value = None if exc is not None else fut.result()
        if self._lost:
            if self.backend.running:
                log.info("connection %s (pid %d) lost during a statement; the statement "
                         "stopped after %.0f ms", self.peer, self.pid,
                         (self.loop.time() - self._lost_at) * 1000)
            value, exc = None, Closed()
        self._resume(exc, value)

    def _resume_input(self) -> None:
        """A parked RECEIVE: the next message if one is complete now (None at EOF)."""
        try:
            msg = self.backend.next_message()
        except P.ProtocolViolation as e:
            self._resume(e)
            return
        if msg is None and not (self._eof or self._lost):
            return                      # still incomplete: stay parked
        self._resume(None, msg)

    def _resume(self, exc, value=None) -> None:
        gen = self._gen
        self._gen = self._waiting = None
        try:
            self._advance(gen, value, exc)
        except BaseException as e:  # noqa: BLE001 - ends the connection (see _fail)
            self._fail(e)
            return
        if self._gen is None:
            self._process()
        else:
            self._write_out()

    async def _start_tls(self) -> None:
        exc = None
        try:
            if self.backend.buffered():
                raise Fatal("received unencrypted data after SSL request", "08P01")
            self.transport.write(b"S")
            self.transport = await self.loop.start_tls(
                self.transport, self, self.server.ssl_context, server_side=True)
        except BaseException as e:  # noqa: BLE001 - thrown into the core
            exc = e
        self._resume(exc)

    # -- ending ---------------------------------------------------------------------------------
    def _client_gone(self) -> None:
        """The client went away: a running statement is canceled (it ends at its next
        check and `Closed` is thrown in when its call returns)."""
        self._lost = True
        self._lost_at = self.loop.time()
        self.backend.cancel("connection")

    def _fail(self, e: BaseException) -> None:
        self._gen = self._waiting = None
        if isinstance(e, (Fatal, P.ProtocolViolation)):
            self._fatal(e.message, e.sqlstate)
        elif not isinstance(e, (ConnectionError, OSError, Closed)):
            log.error("connection %s (pid %d) failed", self.peer, self.backend.pid,
                      exc_info=e)
            self._fatal("internal error; see the server log", "XX000")
        self._close()

    def _fatal(self, message: str, sqlstate: str) -> None:
        self.backend.fatal(message, sqlstate)
        self._write_out()

    def _close(self) -> None:
        """End the connection: what is pending goes out, then the transport closes
        (connection_lost then finishes)."""
        self._write_out()
        self._closing = True
        if not self._lost:
            self._lost = True
            self.transport.close()
        if self._gen is None:
            self._finish()

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self._look_timer is not None:
            self._look_timer.cancel()
        try:
            self.server.unregister(self)
            self.backend.close()
        finally:
            self.server.closed(self)
            if not self.done.done():
                self.done.set_result(None)
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()
