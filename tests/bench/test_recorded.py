"""``bench/recorded/`` holds one summary per published measurement and no scripts: every
directory has its ``summary.md`` and is cited where its figures are published
(bench/HISTORY.md or docs/), and no file there is a program (a reusable script is a
``bench/`` module, linted and typed; a one-off is named in the summary with its commit)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parent.parent.parent
RECORDED = ROOT / "bench" / "recorded"
PUBLISHED = [ROOT / "bench" / "HISTORY.md", *sorted((ROOT / "docs").glob("*.md"))]
# A program, whatever its disguise: source saved as text (``split.py.txt``), or a file
# that starts like one.
SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".py.txt", ".sh.txt", ".ipynb")
SCRIPT_OPENINGS = (b"#!", b"import ", b"from __future__", b'"""')


def directories() -> list[Path]:
    return sorted(p for p in RECORDED.iterdir() if p.is_dir())


def is_script(path: Path) -> bool:
    if path.name.endswith(SCRIPT_SUFFIXES) or path.stat().st_mode & 0o111:
        return True
    with path.open("rb") as f:
        return f.read(32).lstrip().startswith(SCRIPT_OPENINGS)


def scripts_in(top: Path) -> list[str]:
    return [str(p.relative_to(top)) for p in sorted(top.rglob("*")) if p.is_file() and is_script(p)]


def test_every_recorded_directory_has_its_summary() -> None:
    assert directories(), "bench/recorded/ holds the published measurements"
    assert [d.name for d in directories() if not (d / "summary.md").is_file()] == []
    assert [p.name for p in RECORDED.iterdir() if p.is_file()] == []  # a file, not a record


def test_no_script_is_kept_under_recorded() -> None:
    assert scripts_in(RECORDED) == []


def test_every_recorded_directory_is_cited_where_its_figures_are_published() -> None:
    text = "\n".join(doc.read_text(encoding="utf-8") for doc in PUBLISHED)
    assert [d.name for d in directories() if f"bench/recorded/{d.name}/" not in text] == []


def test_a_script_is_recognised_in_any_disguise(tmp_path: Path) -> None:
    (tmp_path / "split.py.txt").write_text("import sys\n")
    (tmp_path / "ab.sh.txt").write_text("echo\n")
    (tmp_path / "run").write_text("#!/bin/sh\necho\n")
    (tmp_path / "tool.txt").write_text('"""A tool."""\nimport os\n')
    (tmp_path / "burst-5000.txt").write_text("  run 1/1: all_delivered_s=1.2\n")
    (tmp_path / "summary.md").write_text("# A summary\n")
    assert scripts_in(tmp_path) == ["ab.sh.txt", "run", "split.py.txt", "tool.txt"]
