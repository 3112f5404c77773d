"""Logging for ``steeple serve``: ``text`` (one line per record), ``json`` (one object per
line with stable keys ``ts``, ``level``, ``logger``, ``msg``, and ``exc`` when there is a
traceback) or ``journal`` (``<N>`` syslog priority prefixes, no timestamp: journald adds
its own); ``auto`` picks journal when systemd's ``$JOURNAL_STREAM`` is set.

Secrets never reach a log line: API keys (``stk_…``) and signing secrets (``whsec_…``) are
masked in every record, whatever logged them (defence in depth: no code logs them on
purpose).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Mapping
from typing import TextIO

from appliance.core.instants import to_datetime
from appliance.settings.model import LogFormat, Settings

SECRET = re.compile(r"\b(stk_|whsec_)[A-Za-z0-9+/=_-]{4,}")
JOURNAL_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3}


class Redact(logging.Filter):
    """Masks API keys and signing secrets in the message and its arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = SECRET.sub(lambda m: f"{m.group(1)}…", message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document = {
            "ts": _rfc3339(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            document["exc"] = SECRET.sub(r"\1…", self.formatException(record.exc_info))
        return json.dumps(document, ensure_ascii=False)


class JournalFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        priority = JOURNAL_PRIORITY.get(record.levelno, 3 if record.levelno > 40 else 6)
        text = f"<{priority}>{record.name}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + SECRET.sub(r"\1…", self.formatException(record.exc_info))
        return text


def _rfc3339(created: float) -> str:
    """The record's own time (read by logging, not here) in milliseconds, fixed width."""
    ms = int(created * 1000)
    return f"{to_datetime(ms - ms % 1000).strftime('%Y-%m-%dT%H:%M:%S')}.{ms % 1000:03d}Z"


def chosen_format(settings: Settings, environ: Mapping[str, str]) -> LogFormat:
    if settings.log_format is LogFormat.AUTO:
        return LogFormat.JOURNAL if environ.get("JOURNAL_STREAM") else LogFormat.TEXT
    return settings.log_format


def configure(settings: Settings, environ: Mapping[str, str], stream: TextIO | None = None) -> None:
    """Install the one handler on the root logger (replacing any)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    formats: dict[LogFormat, logging.Formatter] = {
        LogFormat.TEXT: logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"),
        LogFormat.JSON: JsonFormatter(),
        LogFormat.JOURNAL: JournalFormatter(),
    }
    handler.setFormatter(formats[chosen_format(settings, environ)])
    handler.addFilter(Redact())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    # One line per delivery belongs in the attempts table, not the log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
