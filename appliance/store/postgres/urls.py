"""A PostgreSQL URL as logs and messages show it: never its password.

Plain ``urllib``, so that a Steeple without the PostgreSQL extra can still name the
database it was asked for in its one-line error (docs/scale-out.md, "Install").
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit


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
