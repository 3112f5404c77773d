"""The parsers of setting values: each takes the setting's name as the user would write
it (a flag, a variable, a key of the file) and the text found, and returns the typed
value or raises :class:`~appliance.errors.ConfigError` naming the setting and what was
expected — parsing is strict, a bad value stops the appliance at start.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from appliance.core.forwarded import MAX_TRUSTED
from appliance.core.hosts import ANY
from appliance.errors import ConfigError
from appliance.settings.model import Listen, LogFormat, LogLevel
from appliance.store.infra.postgres.urls import is_postgres_url


def path(name: str, text: str) -> Path:
    if not text.strip():
        raise ConfigError(name, "must be a directory path, got an empty value")
    return Path(text).expanduser()


def listen(name: str, text: str) -> Listen:
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(name, f"expected HOST:PORT such as 127.0.0.1:8080, got {text!r}")
    return Listen(host=host, port=int(port_text))


def cidrs(name: str, text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def networks(name: str, text: str) -> tuple[str, ...]:
    """Comma-separated CIDRs (a bare address is a /32 or /128), each checked now."""
    found = cidrs(name, text)
    for cidr in found:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            raise ConfigError(name, f"expected CIDRs such as 127.0.0.0/8, got {cidr!r}") from None
    return found


def optional_path(name: str, text: str) -> Path | None:
    return Path(text).expanduser() if text.strip() else None


def bounded_int(low: int, high: int) -> Callable[[str, str], int]:
    def parse(name: str, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(name, f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise ConfigError(name, f"must be between {low} and {high}, got {value}")
        return value

    return parse


def auto_or(parse: Callable[[str, str], int]) -> Callable[[str, str], int | None]:
    """``auto`` (None: derived from other settings) or a value ``parse`` accepts."""

    def parse_auto(name: str, text: str) -> int | None:
        return None if text.strip().lower() == "auto" else parse(name, text)

    return parse_auto


def log_format(name: str, text: str) -> LogFormat:
    try:
        return LogFormat(text.lower())
    except ValueError:
        choices = ", ".join(fmt.value for fmt in LogFormat)
        raise ConfigError(name, f"expected one of {choices}, got {text!r}") from None


def database(name: str, text: str) -> str:
    text = text.strip()
    if text and not is_postgres_url(text):
        raise ConfigError(
            name,
            "expected a postgresql://USER:PASSWORD@HOST:PORT/DBNAME URL, or nothing for"
            " SQLite (the file in data_dir)",
        )
    return text


def token(name: str, text: str) -> str:
    if text and (len(text) < 16 or not text.isprintable() or " " in text):
        raise ConfigError(name, "a token is at least 16 printable characters, no spaces")
    return text


def log_level(name: str, text: str) -> LogLevel:
    try:
        return LogLevel(text.lower())
    except ValueError:
        choices = ", ".join(level.value for level in LogLevel)
        raise ConfigError(name, f"expected one of {choices}, got {text!r}") from None


def flag(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise ConfigError(name, f"expected true or false, got {text!r}")
    return value in ("true", "1", "yes")


def trusted_proxies(name: str, text: str) -> int:
    """0 to MAX_TRUSTED proxies; the former boolean spelling: true is 1, false is 0."""
    value = text.strip().lower()
    if value in ("true", "yes"):
        return 1
    if value in ("false", "no", ""):
        return 0
    if not value.isdigit() or int(value) > MAX_TRUSTED:
        raise ConfigError(
            name,
            f"expected the number of reverse proxies in front, 0 to {MAX_TRUSTED} (true is 1,"
            f" false 0), got {text!r}",
        )
    return int(value)


def hosts(name: str, text: str) -> tuple[str, ...]:
    found = cidrs(name, text)
    for host in found:
        if host != ANY and (any(c in host for c in "/@?# ") or "*" in host):
            raise ConfigError(
                name, f"expected host names or addresses such as cron.example.org, got {host!r}"
            )
    return found


def public_url(name: str, text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(name, f"expected a URL such as https://cron.example.org, got {text!r}")
    if parts.path.strip("/") or parts.query or parts.fragment or parts.username:
        raise ConfigError(name, f"expected a scheme, host and port only, got {text!r}")
    try:
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        raise ConfigError(name, f"expected a valid port in {text!r}") from None
    return f"{parts.scheme}://{parts.netloc}"
