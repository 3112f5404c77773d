"""docs/receiver.md's Python code blocks, for the tests that run them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

GUIDE = Path(__file__).parents[2] / "docs" / "receiver.md"
TEXT = GUIDE.read_text(encoding="utf-8")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", TEXT, re.DOTALL)


def run_block(source: str) -> dict[str, Any]:
    """Execute one block as a module of its own; its ``main()`` is guarded, so not run."""
    namespace: dict[str, Any] = {"__name__": "receiver_guide"}
    exec(compile(source, str(GUIDE), "exec"), namespace)
    return namespace


def guide_block(defining: str) -> dict[str, Any]:
    """The namespace of the one block that defines ``defining``."""
    matches = [block for block in python_blocks() if f"def {defining}(" in block]
    assert len(matches) == 1, f"the guide has one block defining {defining}"
    return run_block(matches[0])
