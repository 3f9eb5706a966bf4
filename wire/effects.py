"""What the protocol core (wire/backend.py) asks its adapter (wire/connection.py) to do.

The core never touches a socket, a thread or an event loop. Its handlers are generators:
`Backend.handle(message)` returns one (or `()` when the message needs nothing but bytes),
and every `yield` hands the adapter one effect below; the adapter performs it and sends
the outcome back in (`generator.send(value)`), or throws the exception it raised into the
generator at that point (`generator.throw(exc)`), exactly where an `await` would have
raised it. Bytes to send are not effects: they accumulate in `Backend.out`
(`Backend.send`), and the adapter writes them before it waits for anything (input, a
call, the transport), at the end of each burst of input it handled, and at a `Flush`
once `flush_bytes` are pending, as h11's `data_to_send()` works.

    effect        what the adapter does                                   value sent back
    FLUSH         the pending bytes may go out now; while the transport      None
                  has paused writing, wait until it resumes (back-pressure:
                  a slow client slows the sender)
    Call(fn, a)   fn(*a) in the thread pool; a client that goes away while   fn's result
                  a statement runs (`Backend.running`) cancels it, and
                  `Closed` is thrown in when the call returns
    Durable(f)    f(): a deferred write's finishing call (it waits for the   f's result
                  WAL fsync), run on the server's WAL sync thread (one
                  naming no WAL position: on its pool), never on the loop;
                  the loop is resumed when it is done
    Spawn(fn)     start fn() in the thread pool, do not wait                a handle
    Join(h)       wait for a Spawned call                                   its result
    RECEIVE       the next frontend message (`Backend.next_message`; when   a message or
                  none is complete, once more bytes came; a malformed one   None (EOF)
                  is thrown in as its ProtocolViolation)
    Unread(m)     put message m back at the head of the input (`unread`)    None
    START_TLS     send 'S', then upgrade the transport to TLS               None
    Timer(s)      call `Backend.cancel("timeout")` after s seconds          a handle
    CancelTimer(h) disarm a Timer                                           None

Two exceptions end the connection rather than a statement, raised by the core or thrown
in by the adapter: `Fatal` (send a FATAL ErrorResponse, then close) and `Closed` (the
client went away). Effects are frozen dataclasses (STYLE.md: messages are frozen).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from wire.protocol import ProtocolViolation


class Fatal(Exception):
    """End the connection after sending a FATAL ErrorResponse."""

    def __init__(self, message: str, sqlstate: str):
        super().__init__(message)
        self.message, self.sqlstate = message, sqlstate


class Closed(Exception):
    """The client went away."""


@dataclasses.dataclass(frozen=True, slots=True)
class Flush:
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    fn: Callable
    args: tuple = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Durable:
    finish: Callable


@dataclasses.dataclass(frozen=True, slots=True)
class Spawn:
    fn: Callable


@dataclasses.dataclass(frozen=True, slots=True)
class Join:
    handle: Any


@dataclasses.dataclass(frozen=True, slots=True)
class Receive:
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class Unread:
    message: Any


@dataclasses.dataclass(frozen=True, slots=True)
class StartTLS:
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class Timer:
    seconds: float


@dataclasses.dataclass(frozen=True, slots=True)
class CancelTimer:
    handle: Any


# not a statement's failure: these end the connection
CONNECTION_ERRORS = (ProtocolViolation, Fatal, Closed, ConnectionError)

FLUSH = Flush()
# not an effect: what `Backend.handle_next` returns when nothing can be done until more
# bytes arrive (no complete message, or a batch's look-ahead waits for more)
NEED_INPUT = object()
RECEIVE = Receive()
START_TLS = StartTLS()
