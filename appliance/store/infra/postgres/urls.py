"""PostgreSQL URLs: whether a target is one, and how logs and messages show it (never its
password).

Plain ``urllib``, so that a Steeple without the PostgreSQL extra can still name the
database it was asked for in its one-line error (docs/scale-out.md, "Install").
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database (the one test of it: settings, the
    store's opening, the move command)."""
    return isinstance(target, str) and target.startswith(SCHEMES)


def redacted(url: str) -> str:
    """``url`` as ``postgresql://USER@HOST:PORT/DATABASE``: no password, no options."""
    parts = urlsplit(url)
    user = unquote(parts.username or "")
    try:
        port = parts.port or 5432
    except ValueError:  # a port that is not a number: the URL is named, not echoed
        return "postgresql://…"
    host = parts.hostname or "localhost"
    return f"postgresql://{user}@{host}:{port}/{unquote(parts.path.lstrip('/'))}"
