"""StatusServer: a server process's HTTP port (Kudu's embedded web server, much smaller).

    GET /             an HTML page of the server's status (tablets with Raft role, term and
                      leader; memory; maintenance ops and their last runs; WAL sizes; on a
                      master the tablet servers with liveness and last heartbeat, and tables)
    GET /status.json  the same data as JSON
    GET /metrics      Prometheus text exposition format (the process's own registry)
    anything else     404

A `http.server.ThreadingHTTPServer` on a daemon thread: one thread per request, so a slow
scraper never blocks the page. It binds 127.0.0.1 unless told otherwise and has no
authentication (like Kudu's web UI without SPNEGO): bind a non-loopback address only on
a trusted network. The page reads the server's `status()` on every request; nothing is
cached.
"""

from __future__ import annotations

import html
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

log = logging.getLogger(__name__)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if v != int(v) else f"{int(v):,}"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (list, tuple)):
        return html.escape(", ".join(str(x) for x in v))
    return html.escape(str(v))


def _table(rows: list[dict]) -> str:
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(title: str, status: dict) -> str:
    """Scalars as a definition list, lists of dicts as tables (one per key)."""
    facts, sections = [], []
    for k, v in status.items():
        if isinstance(v, list) and (not v or isinstance(v[0], dict)):
            sections.append(f"<h2>{html.escape(k)} ({len(v)})</h2>" +
                            (_table(v) if v else "<p>none</p>"))
        elif isinstance(v, dict):
            sections.append(f"<h2>{html.escape(k)}</h2>" +
                            _table([{"key": a, "value": b} for a, b in v.items()]))
        else:
            if k == "rss_bytes" and isinstance(v, int):
                v = f"{v / 2**20:,.1f} MiB"
            facts.append(f"<tr><th>{html.escape(k)}</th><td>{_cell(v)}</td></tr>")
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>"
            "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;"
            "margin-bottom:1em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;"
            "font-size:90%}th{background:#eee}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>"
            "<p><a href='/metrics'>/metrics</a> · <a href='/status.json'>/status.json</a>"
            f" · generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')}</p>"
            f"<table>{''.join(facts)}</table>{''.join(sections)}</body></html>")


class StatusServer:
    """Serve /, /status.json and /metrics for one process (module docstring). `port` 0
    picks a free port; `.addr` is "host:port" once constructed."""

    def __init__(self, host: str, port: int, registry, status: Callable[[], dict],
                 title: str):
        self._status = status
        self._registry = registry
        self._title = title
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                outer.serve_get(self)

            def log_message(self, fmt, *args) -> None:
                log.debug("http %s: " + fmt, self.address_string(), *args)

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.host, self.port = self._httpd.server_address[:2]
        self.addr = f"{self.host}:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name="http-status")
        self._thread.start()

    def serve_get(self, req: BaseHTTPRequestHandler) -> None:
        """Answer one GET (`req`: the http.server handler of the request)."""
        path = req.path.split("?", 1)[0]
        try:
            if path == "/metrics":
                body, ctype = generate_latest(self._registry), CONTENT_TYPE_LATEST
            elif path == "/status.json":
                body = json.dumps(self._status(), indent=1, default=str).encode()
                ctype = "application/json"
            elif path in ("/", "/index.html"):
                body = render_html(self._title, self._status()).encode()
                ctype = "text/html; charset=utf-8"
            else:
                req.send_error(404, "no such page (try /, /metrics or /status.json)")
                return
        except Exception as e:  # noqa: BLE001 - report it on the page, keep serving
            log.exception("status page %s failed", path)
            req.send_error(500, f"status unavailable: {e}")
            return
        req.send_response(200)
        req.send_header("Content-Type", ctype)
        req.send_header("Content-Length", str(len(body)))
        req.send_header("Cache-Control", "no-store")
        req.end_headers()
        req.wfile.write(body)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
