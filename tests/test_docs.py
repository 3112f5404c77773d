"""The README, guides and code comments stay true: links and file references resolve,
cited sections exist, commands and flags exist, and nothing cites notes outside the repo."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from appliance.cli.main import _parser
from tests.e2e.readme import PLACEHOLDERS, commands, placeholders_in, sh_blocks

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ARCHITECTURE = ROOT / "docs" / "architecture.md"

TEXT_SUFFIXES = {".py", ".md", ".sql", ".toml", ".yaml", ".yml", ".json", ".txt", ".cfg", ".sh"}
SCANNED = ["appliance", "tests", "bench", "docs", "contracts"]
# A path to a file of this repository: a top-level directory, then a name with an extension
# (``*`` allowed: ``contracts/events/schedule.run.*.json`` names a set).
FILE_REFERENCE = re.compile(
    r"(?<![\w/.-])((?:appliance|bench|contracts|docs|scripts|tests)/[\w./*-]*[\w*]\.[A-Za-z0-9*]+)"
)
# A module the docs name from the package's root: `store/claims.py`, `engine/outcomes.py`.
PACKAGE_REFERENCE = re.compile(
    r"`((?:api|cli|core|engine|live|ops|receiver|store|ui|wiring)/[\w/]*\w\.(?:py|sql))`"
)
GENERATED = ("bench/results/",)  # written by the benchmarks, git-ignored: named, not kept
RECORDED = ROOT / "bench" / "recorded"  # the raw outputs behind published figures
# Notes that live outside this repository: the code explains itself in docs/ instead.
FOREIGN_CITATIONS = ("../shared", "DESIGN §", "DESIGN.md", "STACK-NOTES", "issue text")
SECTION_CITATION = re.compile(r'docs/architecture\.md,? "([^"]+)"')
ADR_SECTION_CITATION = re.compile(r'ADR (\d{4}),? "([^"]+)"')
# bench/HISTORY.md, "Planner, round two": a dated section's title, or its start (before
# the date); the title may run on over a comment's next line.
HISTORY = ROOT / "bench" / "HISTORY.md"
HISTORY_CITATION = re.compile(r'bench/HISTORY\.md,\s+"([^"]+)"')


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for top in SCANNED:
        found = (ROOT / top).rglob("*")
        files += sorted(p for p in found if p.is_file() and p.suffix in TEXT_SUFFIXES)
    return [path for path in files if path != Path(__file__)]  # its samples are on purpose


SCANNED_FILES = scanned_files()


def where(path: Path) -> str:
    return str(path.relative_to(ROOT))


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def headings(doc: Path) -> set[str]:
    """A document's heading titles, also without a trailing ``(…)`` qualifier."""
    titles = re.findall(r"^#+ +(.+?) *$", read(doc), flags=re.MULTILINE)
    return {*titles, *(title.split(" (")[0] for title in titles)}


def exists(reference: str) -> bool:
    if reference.startswith(GENERATED):
        return True
    if "*" in reference:
        return any(ROOT.glob(reference))
    return (ROOT / reference).exists()


def historical(path: Path) -> bool:
    """A raw output kept under bench/recorded/: it names files as they were at its commit
    (a profile's frames), not as they are now. Its summary.md is checked like any doc."""
    return path.is_relative_to(RECORDED) and path.name != "summary.md"


def test_every_file_reference_is_in_the_repository() -> None:
    missing = [
        f"{where(path)}: {ref}"
        for path in SCANNED_FILES
        if not historical(path)
        for ref in sorted({ref.rstrip(".") for ref in FILE_REFERENCE.findall(read(path))})
        if not exists(ref)
    ]
    assert missing == []


def test_nothing_cites_notes_outside_the_repository() -> None:
    cited = [
        f"{where(path)}: {citation}"
        for path in SCANNED_FILES
        for citation in FOREIGN_CITATIONS
        if citation in read(path)
    ]
    assert cited == []


def test_cited_sections_exist() -> None:
    missing = []
    for path in SCANNED_FILES:
        text = read(path)
        for title in SECTION_CITATION.findall(text):
            if title not in headings(ARCHITECTURE):
                missing.append(f"{where(path)}: docs/architecture.md {title!r}")
        for number, title in ADR_SECTION_CITATION.findall(text):
            (adr,) = (ROOT / "docs" / "adr").glob(f"{number}-*.md")
            if title not in headings(adr):
                missing.append(f"{where(path)}: ADR {number} {title!r}")
        for cited in HISTORY_CITATION.findall(text):
            title = " ".join(cited.replace("#", " ").split())
            if not any(h.startswith(title) for h in headings(HISTORY)):
                missing.append(f"{where(path)}: bench/HISTORY.md {title!r}")
    assert missing == []


def test_the_architecture_names_every_module_of_the_package_root() -> None:
    """Each module beside the packages (``appliance/*.py``) is named where the layout is
    described, so a new one cannot go unexplained and a removed one cannot linger."""
    text = read(ARCHITECTURE)
    named = set(re.findall(r"`(\w+\.py)`", text))
    root = {p.name for p in (ROOT / "appliance").glob("*.py") if p.name != "__init__.py"}
    assert sorted(root - named) == []
    anywhere = {p.name for p in (ROOT / "appliance").rglob("*.py")}
    assert sorted(named - anywhere) == []  # a bare name is a module somewhere in the package


def test_the_architecture_names_every_package() -> None:
    """Each package of the tree (``cli/``, ``store/usecases/`` …) is named in the layout, so
    a new one is explained where a newcomer looks first."""
    text = read(ARCHITECTURE)
    packages = {
        str(p.parent.relative_to(ROOT / "appliance")) + "/"
        for p in (ROOT / "appliance").rglob("__init__.py")
        if p.parent != ROOT / "appliance"
    }
    assert sorted(p for p in packages if f"`{p}" not in text) == []


def test_the_top_level_is_the_documented_one() -> None:
    """Each entry at the repository's root is in CONTRIBUTING.md's table, and each entry
    of the table exists: no stray file (an empty database, a screenshot) at the root."""
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    top = {path.split("/")[0] + ("/" if "/" in path else "") for path in tracked}
    table = read(ROOT / "CONTRIBUTING.md").split("## The repository", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| ")]
    documented = {name for cell in first_cells for name in re.findall(r"`([^`]+)`", cell)}
    assert sorted(top - documented) == []
    assert sorted(documented - top) == []


def test_every_module_the_docs_name_exists() -> None:
    missing = [
        f"{where(doc)}: {ref}"
        for doc in DOCS
        for ref in sorted(set(PACKAGE_REFERENCE.findall(read(doc))))
        if not (ROOT / "appliance" / ref).exists()
    ]
    assert missing == []


def test_the_checks_find_what_they_look_for() -> None:
    """The patterns above catch the shapes they are written for (else the tests pass
    vacuously)."""
    sample = (
        'see docs/missing.md, (contracts/events/schedule.run.*.json) and "appliance/x.py".'
        ' docs/architecture.md, "One process"; ADR 0033 "Claim"'
    )
    assert FILE_REFERENCE.findall(sample) == [
        "docs/missing.md",
        "contracts/events/schedule.run.*.json",
        "appliance/x.py",
        "docs/architecture.md",
    ]
    assert not exists("docs/missing.md") and exists("contracts/events/schedule.run.*.json")
    assert SECTION_CITATION.findall(sample) == ["One process"]
    assert PACKAGE_REFERENCE.findall("(`store/leases.py`, `engine/outcomes.py`)") == [
        "store/leases.py",
        "engine/outcomes.py",
    ]
    assert not (ROOT / "appliance/store/leases.py").exists()
    assert ADR_SECTION_CITATION.findall(sample) == [("0033", "Claim")]
    cited = 'bench/HISTORY.md, "Costs once quoted in\n    # code comments"'
    assert HISTORY_CITATION.findall(cited) == ["Costs once quoted in\n    # code comments"]
    assert len(SCANNED_FILES) > 100


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
        assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"


def test_readme_commands_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "scripts/test" in text and (ROOT / "scripts" / "test").stat().st_mode & 0o111
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^(exec )?scripts/test\b", ci, re.MULTILINE), "CI runs the README's command"
    assert "git status --porcelain" in ci, "CI fails when the test run changed the tree"
    parser = _parser()
    serve_flags = {"--allow-target", "--listen", "--data-dir"}
    for flag in re.findall(r"steeple serve((?: --[a-z-]+(?: \S+)?)*)", text):
        for used in re.findall(r"--[a-z-]+", flag):
            assert used in serve_flags, used
    assert parser.parse_args(["serve", "--allow-target", "127.0.0.0/8"]).allow_targets
    assert parser.parse_args(["tenant", "create", "acme"]).name == "acme"


@pytest.mark.parametrize("script", ["test", "check"])
@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--fast", "--help"]], ids=" ".join)
def test_the_gate_scripts_help_prints_usage_and_runs_nothing(script: str, args: list[str]) -> None:
    """A newcomer's first ``scripts/test --help`` must not install or run the gate: it
    prints the usage and exits 0 within seconds (the gate takes minutes)."""
    done = subprocess.run(
        [str(ROOT / "scripts" / script), *args], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert f"Usage: scripts/{script} [--fast]" in done.stdout
    assert "== ruff" not in done.stdout and done.stderr == ""


def test_every_readme_command_runs_after_the_quick_start_as_written() -> None:
    """The README's commands work in the quick start's shell: ``steeple`` is the clone's
    ``.venv/bin/steeple`` (no bare ``steeple``: not on PATH after a venv install), one name
    for the API key, and each ``…`` a reader fills in is one the newcomer's walkthrough
    (tests/e2e/test_readme_walkthrough.py) knows where to find."""
    text = read(ROOT / "README.md")
    found = [command for block in sh_blocks(text) for command in commands(block)]
    assert any(command.startswith("python3 -c '") for command in found)  # the receiver
    bare = [c for c in found if re.search(r"(^|&& |\| )steeple ", c)]
    assert bare == []
    assert "STEEPLE_KEY" not in text and "$STEEPLE_API_KEY" in text
    known = {placeholder.text for placeholder in PLACEHOLDERS}
    unknown = sorted({p for c in found for p in placeholders_in(c)} - known)
    assert unknown == []
    for placeholder in PLACEHOLDERS:  # each is printed by a command before its first use
        first_use = next(i for i, c in enumerate(found) if placeholder.text in c)
        assert any(placeholder.source in c for c in found[:first_use]), placeholder


def test_every_screenshot_is_in_the_ui_guide_and_every_one_it_shows_exists() -> None:
    """docs/ui.md's table shows each PNG under docs/ui/ (``scripts/screenshots`` writes
    them): none stale and unshown, none shown and missing."""
    shown = set(re.findall(r"\]\(ui/([\w-]+\.png)\)", read(ROOT / "docs" / "ui.md")))
    kept = {path.name for path in (ROOT / "docs" / "ui").glob("*.png")}
    assert kept - shown == set(), "screenshots docs/ui.md does not show"
    assert shown - kept == set(), "screenshots docs/ui.md shows that are not there"
