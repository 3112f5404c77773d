"""The UI's files: vendored assets match their pinned hashes, every file under web/ is
shipped in the wheel (package-data globs through the appliance/ui/web symlink), and
templates are autoescaped with no inline script or style."""

from __future__ import annotations

import fnmatch
import hashlib
import re
import tomllib
from pathlib import Path

from appliance.ui.app import WEB_DIR

ROOT = Path(__file__).resolve().parents[2]


def test_vendored_files_match_the_manifest() -> None:
    vendor = ROOT / "web" / "static" / "vendor"
    lines = [
        line.split()
        for line in (vendor / "MANIFEST.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines
    for fields in lines:
        name, digest = fields[0], fields[-1]
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, name
    axe = ROOT / "tests" / "ui" / "vendor" / "axe-4.14.1.min.js"
    assert b"axe v4.14.1" in axe.read_bytes()[:200]


def test_every_web_file_is_package_data_and_found_from_the_package() -> None:
    assert WEB_DIR.resolve() == (ROOT / "web").resolve()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["appliance.ui"]
    files = [p.relative_to(ROOT).as_posix() for p in (ROOT / "web").rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert any(fnmatch.fnmatch(path, g) for g in globs), f"{path} would not ship"


def test_templates_have_no_inline_script_or_style_and_nothing_is_marked_safe() -> None:
    for template in (ROOT / "web" / "templates").glob("*.html"):
        text = template.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)", text), template.name
        assert "<style" not in text and " style=" not in text, template.name
        assert not re.search(r"\bon[a-z]+=", text), template.name
        assert "|safe" not in text and "autoescape false" not in text, template.name
