"""Users and password authentication: trust, cleartext, md5 and SCRAM-SHA-256.

Users live in `users.json` in the data directory, replaced atomically on every change
(`engine.fs.write_json_atomic`). Passwords are never stored: each user keeps PostgreSQL's
two verifier forms,

    scram  "SCRAM-SHA-256$<iterations>:<salt b64>$<StoredKey b64>:<ServerKey b64>"
    md5    "md5" + md5hex(password + username)

so any method works for a password set in clear text; a password given already hashed
(psql's `\\password` sends `ALTER USER u PASSWORD 'SCRAM-SHA-256$...'`) keeps only that
form (md5 authentication then runs SCRAM, as PostgreSQL does). The default user `kudusql`
(superuser) exists from the start, without a password: over trust it logs in; for password
methods give it one (`ALTER USER kudusql PASSWORD '...'`, or the KUDUSQL_PASSWORD environment
variable at `kudusql serve` start).

Statements (parsed by the dialect into planner.commands.KuduRole, run by
`UserStore.execute`; tags as PostgreSQL's):

    CREATE {USER | ROLE} name [[WITH] option ...]        CREATE ROLE
    ALTER {USER | ROLE} name [[WITH] option ...]         ALTER ROLE
    DROP {USER | ROLE} [IF EXISTS] name [, ...]          DROP ROLE
    option: [ENCRYPTED] PASSWORD 'pw' | PASSWORD NULL | SUPERUSER | NOSUPERUSER
            | LOGIN | NOLOGIN | (other role attributes are accepted and ignored)

Only superusers create, drop or alter other users (42501); anyone may change their own
password. Errors: 42710 role exists, 42704 no such role, 55006 dropping yourself.

The authenticators are sans-I/O: `start()` gives the first server message, `step(data)`
takes the payload of the client's 'p' message and returns (reply bytes, finished); a
failure raises `AuthFailed` (the connection sends FATAL 28P01 and closes). SCRAM follows
RFC 5802/7677 without channel binding: libpq sends an empty `n=` user name (the startup
user counts) and `y,,` is accepted because -PLUS is never offered.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import os
import secrets
import threading

from engine.fs import write_json_atomic
from planner.errors import SqlError
from planner.result import StatementResult
from wire import protocol as P
from planner.commands import KuduRole

USERS_FILE = "users.json"
DEFAULT_USER = "kudusql"
SCRAM_ITERATIONS = 4096
METHODS = ("trust", "password", "md5", "scram-sha-256")


class AuthFailed(Exception):
    def __init__(self, message: str, sqlstate: str = "28P01"):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate


# -- verifiers --------------------------------------------------------------------------------
def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def scram_verifier(password: str, salt: bytes | None = None,
                   iterations: int = SCRAM_ITERATIONS) -> str:
    salt = salt or secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    server = _hmac(salted, b"Server Key")
    return f"SCRAM-SHA-256${iterations}:{_b64(salt)}${_b64(stored)}:{_b64(server)}"


def parse_scram(verifier: str) -> tuple[int, bytes, bytes, bytes]:
    """(iterations, salt, StoredKey, ServerKey)."""
    head, keys = verifier.split("$", 1)[1].split("$")
    it, salt = head.split(":")
    stored, server = keys.split(":")
    return int(it), base64.b64decode(salt), base64.b64decode(stored), \
        base64.b64decode(server)


def md5_verifier(password: str, user: str) -> str:
    return "md5" + hashlib.md5((password + user).encode("utf-8")).hexdigest()


def _is_scram(v: str) -> bool:
    try:
        return v.startswith("SCRAM-SHA-256$") and len(parse_scram(v)) == 4
    except (ValueError, IndexError):
        return False


def _is_md5(v: str) -> bool:
    return len(v) == 35 and v.startswith("md5") and all(c in "0123456789abcdef"
                                                         for c in v[3:])


@dataclasses.dataclass
class User:
    name: str
    superuser: bool = False
    login: bool = True
    scram: str | None = None
    md5: str | None = None

    def set_password(self, password: str | None) -> None:
        if password is None:
            self.scram = self.md5 = None
        elif _is_scram(password):
            self.scram, self.md5 = password, None
        elif _is_md5(password):
            self.scram, self.md5 = None, password
        else:
            self.scram = scram_verifier(password)
            self.md5 = md5_verifier(password, self.name)

    def check_password(self, password: str) -> bool:
        if self.scram:
            it, salt, stored, _ = parse_scram(self.scram)
            salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, it)
            key = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
            return hmac.compare_digest(key, stored)
        if self.md5:
            return hmac.compare_digest(md5_verifier(password, self.name), self.md5)
        return False


class UserStore:
    """The users of one data directory (thread-safe; every change is written at once)."""

    def __init__(self, data_dir: str | None):
        self.path = os.path.join(data_dir, USERS_FILE) if data_dir else None
        self._lock = threading.Lock()
        self.users: dict[str, User] = {}
        if self.path and os.path.exists(self.path):
            with open(self.path) as f:
                doc = json.load(f)
            for name, u in doc.get("users", {}).items():
                self.users[name] = User(name, bool(u.get("superuser")), u.get("login", True),
                                        u.get("scram"), u.get("md5"))
        if not self.users:
            self.users[DEFAULT_USER] = User(DEFAULT_USER, superuser=True)

    def _save(self) -> None:
        if self.path is None:
            return
        doc = {"version": 1, "users": {
            n: {"superuser": u.superuser, "login": u.login, "scram": u.scram, "md5": u.md5}
            for n, u in sorted(self.users.items())}}
        write_json_atomic(self.path, doc, indent=1)

    def get(self, name: str) -> User | None:
        with self._lock:
            u = self.users.get(name)
            return dataclasses.replace(u) if u is not None else None

    def set_password(self, name: str, password: str | None) -> None:
        with self._lock:
            self.users[name].set_password(password)
            self._save()

    # -- statements -------------------------------------------------------------------------
    def execute(self, node: KuduRole, current_user: str) -> StatementResult:
        """CREATE / ALTER / DROP USER|ROLE."""
        with self._lock:
            me = self.users.get(current_user)
            su = me is not None and me.superuser
            verb = node.verb
            if verb == "DROP ROLE":
                return self._drop(node.args["names"], bool(node.args.get("if_exists")),
                                  current_user, su)
            name = node.args["names"][0]
            if verb == "CREATE ROLE":
                if not su:
                    raise SqlError("permission denied to create role", "42501")
                if name in self.users:
                    raise SqlError(f'role "{name}" already exists', "42710")
                user = User(name)
                self._options(node.args.get("options") or (), user, su)
                self.users[name] = user
                self._save()
                return StatementResult("CREATE ROLE")
            if node.args.get("rename"):
                raise SqlError("ALTER ROLE ... RENAME is not supported", "0A000")
            user = self.users.get(name)
            if user is None:
                raise SqlError(f'role "{name}" does not exist', "42704")
            if not su and name != current_user:
                raise SqlError("permission denied", "42501")
            changed = dataclasses.replace(user)
            self._options(node.args.get("options") or (), changed, su)
            self.users[name] = changed
            self._save()
            return StatementResult("ALTER ROLE")

    @staticmethod
    def _options(options, user: User, su: bool) -> None:
        for opt, value in options:
            if opt == "password":
                user.set_password(value)
            elif opt == "superuser":
                if not su:
                    raise SqlError("must be superuser to change the superuser attribute",
                                   "42501")
                user.superuser = value
            elif opt == "login":
                user.login = value

    def _drop(self, names, if_exists: bool, current_user: str, su: bool) -> StatementResult:
        if not su:
            raise SqlError("permission denied to drop role", "42501")
        for n in names:
            if n == current_user:
                raise SqlError("current user cannot be dropped", "55006")
            if n not in self.users and not if_exists:
                raise SqlError(f'role "{n}" does not exist', "42704")
        notices = []
        for n in names:
            if self.users.pop(n, None) is None:
                notices.append(f'role "{n}" does not exist, skipping')
        self._save()
        return StatementResult("DROP ROLE", notices=notices)


# -- authenticators ---------------------------------------------------------------------------
def _failed(user: str) -> AuthFailed:
    return AuthFailed(f'password authentication failed for user "{user}"')


class CleartextAuth:
    def __init__(self, user: User | None, name: str):
        self.user, self.name = user, name

    def start(self) -> bytes:
        return P.auth_cleartext()

    def step(self, data: bytes) -> tuple[bytes, bool]:
        pw = data.rstrip(b"\0").decode("utf-8", "replace")
        if self.user is None or not self.user.check_password(pw):
            raise _failed(self.name)
        return b"", True


class Md5Auth:
    def __init__(self, user: User | None, name: str):
        self.user, self.name = user, name
        self.salt = secrets.token_bytes(4)

    def start(self) -> bytes:
        return P.auth_md5(self.salt)

    def step(self, data: bytes) -> tuple[bytes, bool]:
        got = data.rstrip(b"\0").decode("ascii", "replace")
        if self.user is None or not self.user.md5:
            raise _failed(self.name)
        want = "md5" + hashlib.md5(self.user.md5[3:].encode("ascii") + self.salt).hexdigest()
        if not hmac.compare_digest(got, want):
            raise _failed(self.name)
        return b"", True


class ScramAuth:
    """Server side of SCRAM-SHA-256 (no channel binding)."""

    MECHANISM = "SCRAM-SHA-256"

    def __init__(self, user: User | None, name: str):
        self.name = name
        if user is not None and user.scram:
            self.iterations, self.salt, self.stored, self.server_key = parse_scram(user.scram)
            self.mock = False
        else:   # unknown user / no SCRAM secret: run the exchange, fail at the end
            self.iterations, self.salt = SCRAM_ITERATIONS, secrets.token_bytes(16)
            self.stored = self.server_key = secrets.token_bytes(32)
            self.mock = True
        self.state = "initial"

    def start(self) -> bytes:
        return P.auth_sasl([self.MECHANISM])

    def step(self, data: bytes) -> tuple[bytes, bool]:
        if self.state == "initial":
            return self._first(data), False
        if self.state == "continue":
            return self._final(data), True
        raise AuthFailed("unexpected SASL message", "08P01")

    def _first(self, data: bytes) -> bytes:
        end = data.find(b"\0")
        if end < 0 or len(data) < end + 5:
            raise AuthFailed("malformed SASLInitialResponse", "08P01")
        mech = data[:end].decode("ascii", "replace")
        if mech != self.MECHANISM:
            raise AuthFailed("client selected an invalid SASL authentication mechanism",
                             "28000")
        msg = data[end + 5:].decode("utf-8", "replace")
        if msg[:2] not in ("n,", "y,"):
            raise AuthFailed("unsupported SCRAM channel-binding mode", "08P01")
        parts = msg.split(",", 2)
        if len(parts) != 3:
            raise AuthFailed("malformed SCRAM message", "08P01")
        self.gs2 = parts[0] + "," + parts[1] + ","
        self.client_first_bare = parts[2]
        attrs = dict(a.split("=", 1) for a in self.client_first_bare.split(",") if "=" in a)
        cnonce = attrs.get("r")
        if not cnonce:
            raise AuthFailed("malformed SCRAM message: no nonce", "08P01")
        self.nonce = cnonce + _b64(secrets.token_bytes(18))
        self.server_first = f"r={self.nonce},s={_b64(self.salt)},i={self.iterations}"
        self.state = "continue"
        return P.auth_sasl_continue(self.server_first.encode("ascii"))

    def _final(self, data: bytes) -> bytes:
        self.state = "done"
        msg = data.decode("utf-8", "replace")
        without_proof, _, proof_attr = msg.rpartition(",p=")
        attrs = dict(a.split("=", 1) for a in without_proof.split(",") if "=" in a)
        if not proof_attr or attrs.get("r") != self.nonce:
            raise _failed(self.name)
        if base64.b64decode(attrs.get("c", "")) != self.gs2.encode("ascii"):
            raise AuthFailed("SCRAM channel binding check failed", "08P01")
        try:
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError:
            raise _failed(self.name) from None
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}"
        sig = _hmac(self.stored, auth_message.encode("utf-8"))
        if len(proof) != len(sig):
            raise _failed(self.name)
        client_key = bytes(a ^ b for a, b in zip(proof, sig))
        if self.mock or not hmac.compare_digest(hashlib.sha256(client_key).digest(),
                                                self.stored):
            raise _failed(self.name)
        server_sig = _hmac(self.server_key, auth_message.encode("utf-8"))
        return P.auth_sasl_final(f"v={_b64(server_sig)}".encode("ascii"))


def authenticator(method: str, user: User | None, name: str):
    """The exchange for `method`, or None for trust."""
    if method == "trust":
        return None
    if method == "password":
        return CleartextAuth(user, name)
    if method == "md5":
        if user is not None and user.scram and not user.md5:
            return ScramAuth(user, name)
        return Md5Auth(user, name)
    if method == "scram-sha-256":
        return ScramAuth(user, name)
    raise ValueError(f"unknown auth method {method!r}")
