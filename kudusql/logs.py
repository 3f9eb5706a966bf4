"""Logging of the server processes (`kudusql serve`, master, tablet server): one format,
INFO by default (DEBUG with --verbose). sqlglot's own INFO messages ("Applying array index
offset (-1)", once per statement that indexes an array) say how it transpiles, nothing an
operator needs: they are kept at WARNING, so a busy server's log is its own events."""

from __future__ import annotations

import logging


def configure(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not verbose:
        logging.getLogger("sqlglot").setLevel(logging.WARNING)
