"""The wire server in-process: one database and one server per test module, on a free
127.0.0.1 port, run by a background-thread event loop and stopped at teardown."""

from __future__ import annotations

import dataclasses

import pytest

from kudusql.session import Database
from wire.server import ServerConfig, ServerThread


@dataclasses.dataclass
class Running:
    db: Database
    thread: ServerThread

    @property
    def port(self) -> int:
        return self.thread.port

    @property
    def server(self):
        return self.thread.server

    def dsn(self, user: str = "kudusql", **kw) -> str:
        extra = "".join(f" {k}={v}" for k, v in kw.items())
        return f"host=127.0.0.1 port={self.port} user={user} dbname=kudusql{extra}"

    def asyncpg_kw(self, **kw) -> dict:
        return {"host": "127.0.0.1", "port": self.port, "user": "kudusql",
                "database": "kudusql", **kw}


def start_server(path, **config) -> Running:
    db = Database.open(str(path))
    try:
        t = ServerThread(db, ServerConfig(port=0, **config)).start()
    except BaseException:
        db.close()
        raise
    return Running(db, t)


def stop_server(r: Running) -> None:
    r.thread.stop()
    r.db.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    r = start_server(tmp_path_factory.mktemp("wire") / "db")
    yield r
    stop_server(r)


def record_answers(monkeypatch, owner, name: str) -> list[bool]:
    """Wrap `owner.name` (a fast path, or a method that may decline) for the test: each
    call appends whether it answered (returned something other than None) to the list
    returned, and returns what the real one did."""
    answered: list[bool] = []
    real = getattr(owner, name)

    def recording(*args):
        done = real(*args)
        answered.append(done is not None)
        return done
    monkeypatch.setattr(owner, name, recording)
    return answered
