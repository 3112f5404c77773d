"""``steeple init``: the data directory (``0700``) and a ``steeple.toml`` in it that lists
every setting of the one settings table, commented, with its default — so an operator's
choices (given as flags to ``init``, or edited in later) persist across restarts.

The file is never overwritten: a second ``init`` without flags leaves it as it is; with
flags, it refuses (the choices would silently not apply) and says to edit the file.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping
from pathlib import Path

from appliance.errors import ConfigError
from appliance.settings.table import SETTINGS, SettingDef, is_list
from appliance.store.infra.datadir import FILE_MODE

HEADER = """\
# Steeple settings, read by `steeple serve` and every other command (from the data
# directory, or the file STEEPLE_CONFIG / --config names). Precedence, highest first:
# command-line flag, STEEPLE_* environment variable, this file, default. Uncomment a line
# to change it; docs/configuration.md explains each setting. Written by `steeple init`,
# which never overwrites it.
"""


def write_config(path: Path, chosen: Mapping[str, str], *, in_data_dir: bool) -> Path | None:
    """Write the settings file at ``path`` (its directory must exist) with ``chosen``
    values set (by setting name). Returns the file written, or None when one exists and
    nothing was chosen; ConfigError when one exists and values were chosen."""
    if path.exists():
        if chosen:
            raise ConfigError(
                "config", f"{path} exists and init never overwrites it: edit it instead"
            )
        return None
    text = render(chosen, in_data_dir=in_data_dir)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    return path


def render(chosen: Mapping[str, str], *, in_data_dir: bool = True) -> str:
    """The whole file: a header, then each setting's help, variable and default. A file
    in the data directory cannot set ``data_dir``; one elsewhere can."""
    sections = (_section(d, chosen.get(d.name), in_data_dir) for d in SETTINGS)
    return HEADER + "".join(sections)


def _section(d: SettingDef, value: str | None, in_data_dir: bool) -> str:
    lines = [""]
    lines += [f"# {line}" for line in textwrap.wrap(d.help, 86)]
    env = d.env + (f" (or {d.env}_FILE, or a systemd credential)" if d.secret else "")
    lines.append(f"# environment: {env}")
    if d.name == "data_dir" and in_data_dir:
        lines.append("# Set with --data-dir or STEEPLE_DATA_DIR: this file lives in it.")
        return "\n".join(lines) + "\n"
    if d.secret:
        lines.append("# A secret: prefer the _FILE variable or a credential to this file.")
    if value is not None:
        lines.append(f"{d.name} = {_toml(d, value)}")
    else:
        lines.append(f"# {d.name} = {_toml(d, d.default())}")
    return "\n".join(lines) + "\n"


def _toml(d: SettingDef, text: str) -> str:
    if is_list(d):
        items = [part.strip() for part in text.split(",") if part.strip()]
        return "[" + ", ".join(_quote(item) for item in items) + "]"
    if text.isdigit():
        return text
    return _quote(text)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
