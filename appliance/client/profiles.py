"""Which appliance the client talks to, with which API key.

Rules this module guards:
1. Each of the URL and the key is taken from the first that gives it: the command line
   (``--url``), the environment (``STEEPLE_URL``, ``STEEPLE_API_KEY``), then the profile
   (``--profile NAME``, else ``STEEPLE_PROFILE``, else ``default``).
2. Profiles live in one TOML file, ``profiles.toml`` in the user's config directory
   (platformdirs: ``~/.config/steeple`` on Linux), written by ``steeple login`` only:
   created with mode 0600 in a 0700 directory, replaced atomically.
3. A profile file others can read is refused, as ssh refuses such a key: it holds keys.
4. A profile named on the command line that does not exist is an error, never a silent
   fallback to another appliance.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from appliance.client.http import Client, ClientError

PROFILE_FILE = "profiles.toml"
DEFAULT_PROFILE = "default"
PROFILE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    name: str
    url: str
    api_key: str


def config_dir() -> Path:
    """The user's config directory for Steeple (honours ``XDG_CONFIG_HOME`` on Linux)."""
    return Path(platformdirs.user_config_dir("steeple", appauthor=False))


def profile_path(directory: Path | None = None) -> Path:
    return (directory or config_dir()) / PROFILE_FILE


def resolve_client(
    *,
    url: str | None,
    profile: str | None,
    environ: Mapping[str, str],
    directory: Path | None = None,
) -> Client:
    """The client rule 1 picks; ClientError naming what is missing or wrong."""
    named = profile or environ.get("STEEPLE_PROFILE") or None
    stored = read_profile(named or DEFAULT_PROFILE, directory, required=named is not None)
    chosen_url = url or environ.get("STEEPLE_URL") or (stored.url if stored else "")
    key = environ.get("STEEPLE_API_KEY") or (stored.api_key if stored else "")
    if not chosen_url:
        raise ClientError("no appliance URL: give --url, set STEEPLE_URL or run `steeple login`")
    if not key:
        raise ClientError("no API key: set STEEPLE_API_KEY or run `steeple login --key-file`")
    return Client.from_settings(chosen_url, key)


def read_profile(name: str, directory: Path | None = None, *, required: bool) -> Profile | None:
    """Profile ``name`` from the profile file; None if absent and not ``required``."""
    path = profile_path(directory)
    profiles = _read_all(path)
    found = profiles.get(name)
    if found is None and required:
        known = ", ".join(sorted(profiles)) or "none yet"
        raise ClientError(f"no profile {name!r} in {path} (profiles: {known})")
    return found


def write_profile(profile: Profile, directory: Path | None = None) -> Path:
    """Add or replace ``profile`` in the profile file (rule 2); its path."""
    if not PROFILE_NAME.match(profile.name):
        raise ClientError(f"a profile name is 1 to 64 of A-Z a-z 0-9 _ -, not {profile.name!r}")
    path = profile_path(directory)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    profiles = _read_all(path) | {profile.name: profile}
    temporary = path.with_name(f".{PROFILE_FILE}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(_render(profiles))
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    os.replace(temporary, path)
    return path


def _read_all(path: Path) -> dict[str, Profile]:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return {}
    if mode & 0o077:
        raise ClientError(
            f"{path} holds API keys but others may read it (mode {mode:o}): chmod 600 it"
        )
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ClientError(f"cannot read {path}: {exc}") from exc
    tables = document.get("profiles", {})
    if not isinstance(tables, dict):
        raise ClientError(f"{path}: `profiles` must be a table of profiles")
    return {name: _profile(path, name, table) for name, table in tables.items()}


def _profile(path: Path, name: str, table: object) -> Profile:
    if not isinstance(table, dict):
        raise ClientError(f"{path}: profile {name!r} must be a table")
    url, key = table.get("url"), table.get("api_key")
    if not isinstance(url, str) or not isinstance(key, str):
        raise ClientError(f"{path}: profile {name!r} needs `url` and `api_key` strings")
    return Profile(name=name, url=url, api_key=key)


def _render(profiles: Mapping[str, Profile]) -> str:
    lines = ["# Written by `steeple login`: appliances and their API keys. Keep it private.\n"]
    for name in sorted(profiles):
        profile = profiles[name]
        # A JSON string is a valid TOML basic string (the same escapes).
        lines.append(f"\n[profiles.{name}]\n")
        lines.append(f"url = {json.dumps(profile.url)}\n")
        lines.append(f"api_key = {json.dumps(profile.api_key)}\n")
    return "".join(lines)
