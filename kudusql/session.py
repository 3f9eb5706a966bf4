"""`kudusql.session.Database` / `Session`: the public names of the session layer, which lives
below the front ends in the top-level `session` package (session/__init__.py)."""

from session import Database, InternalError, QueryCanceled, Session  # noqa: F401
