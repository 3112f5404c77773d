"""Where the UI may send a browser back to: a path on this origin, or a default
(docs/ui.md, "Security").

A browser parses a ``Location`` by the WHATWG URL rules, not Python's: it strips leading
and trailing C0 controls and spaces, removes every tab and newline, and reads ``\\`` as
``/``; so ``/\\t/evil`` and ``/\\evil`` are ``//evil``, another host. Rather than copy
those rules and normalise, :func:`local_path` accepts only a target they leave alone —
printable ASCII, no backslash, one leading ``/`` not followed by ``/`` — which every
parser reads as a path on the current origin, and answers the default for anything else.
"""

from __future__ import annotations

import re
from typing import Final

# One "/", then a character that is neither "/" nor "\" (or nothing), then printable
# ASCII without "\": no control, space, tab, newline or non-ASCII character anywhere.
_ALLOWED: Final = re.compile(r"/(?:[!-.0-\[\]-~][!-\[\]-~]*)?")


def local_path(target: str, default: str) -> str:
    """``target`` when it is a path on this origin by every URL parser's reading, else
    ``default`` (which the caller writes, so is trusted)."""
    return target if _ALLOWED.fullmatch(target) else default
