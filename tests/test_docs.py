"""The README and guides stay true: links resolve, commands and flags exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from appliance.cli import _parser

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
        assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"


def test_readme_commands_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "scripts/test" in text and (ROOT / "scripts" / "test").stat().st_mode & 0o111
    assert (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip().endswith("scripts/test")
    parser = _parser()
    serve_flags = {"--allow-target", "--listen", "--data-dir"}
    for flag in re.findall(r"steeple serve((?: --[a-z-]+(?: \S+)?)*)", text):
        for used in re.findall(r"--[a-z-]+", flag):
            assert used in serve_flags, used
    assert parser.parse_args(["serve", "--allow-target", "127.0.0.0/8"]).allow_targets
    assert parser.parse_args(["tenant", "create", "acme"]).name == "acme"
