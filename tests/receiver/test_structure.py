"""The helper can be copied next to a tenant's service: it imports the standard library,
``appliance.core.ids``, ``appliance.core.signing`` and itself — nothing else. (The
import-linter contract in pyproject.toml forbids a list of modules; this is the allow-list.)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import appliance.receiver

ALLOWED = {"appliance.core.ids", "appliance.core.signing"}
PACKAGE = Path(appliance.receiver.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_receiver_imports_only_the_stdlib_core_ids_and_core_signing() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 5
    for module in modules:
        for name in _imports(module):
            top = name.partition(".")[0]
            own = name == "appliance.receiver" or name.startswith("appliance.receiver.")
            assert (
                top in sys.stdlib_module_names or top == "__future__" or own or name in ALLOWED
            ), f"{module.name} imports {name}"


def test_the_allowed_core_modules_are_themselves_stdlib_only() -> None:
    for name in ALLOWED:
        path = Path(sys.modules[name].__file__ or "")
        for imported in _imports(path):
            assert imported.partition(".")[0] in sys.stdlib_module_names | {"__future__"}, (
                f"{name} imports {imported}"
            )
