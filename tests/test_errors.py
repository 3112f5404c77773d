"""The exception tree drawn in ``appliance/errors.py`` is the tree the code defines."""

from __future__ import annotations

import importlib
import pkgutil
import re

import appliance
from appliance import errors
from appliance.errors import SteepleError

# "     │    ├── VersionMismatch   If-Match … [store.schedules]": depth from the indent.
BRANCH = re.compile(r"^ {4}(?P<indent>[ │]*)[├└]── (?P<name>\w+)(?:.*\[(?P<module>[\w.]+)\])?")
INDENT = len(" │   ")


def docstring() -> str:
    assert errors.__doc__ is not None
    return errors.__doc__


def drawn_tree() -> dict[str, tuple[str, str]]:
    """Each drawn class: (its parent's name, its module)."""
    parents = {-1: SteepleError.__name__}
    tree: dict[str, tuple[str, str]] = {}
    for line in docstring().splitlines():
        if (match := BRANCH.match(line)) is None:
            continue
        depth = len(match["indent"]) // INDENT
        parents[depth] = match["name"]
        module = f"appliance.{match['module']}" if match["module"] else errors.__name__
        tree[match["name"]] = (parents[depth - 1], module)
    return tree


def defined_tree() -> dict[str, tuple[str, str]]:
    """Every subclass of SteepleError in ``appliance``: (its parent's name, its module)."""
    for module in pkgutil.walk_packages(appliance.__path__, "appliance."):
        if module.name != "appliance.__main__":  # it runs the CLI
            importlib.import_module(module.name)
    found: dict[str, tuple[str, str]] = {}
    todo = [SteepleError]
    while todo:
        parent = todo.pop()
        for cls in parent.__subclasses__():
            found[cls.__name__] = (parent.__name__, cls.__module__)
            todo.append(cls)
    return found


def test_the_drawn_tree_is_the_defined_tree() -> None:
    drawn = drawn_tree()
    assert len(drawn) >= 10  # the drawing was read at all
    assert drawn == defined_tree()


def test_the_exceptions_named_outside_the_tree_exist_outside_it() -> None:
    outside = docstring().split("Outside the tree:")[1]
    named = re.findall(r"``([\w.]+)\.([A-Z]\w+)``", outside)
    assert len(named) == 3
    for module, name in named:
        cls = getattr(importlib.import_module(f"appliance.{module}"), name)
        assert issubclass(cls, Exception) and not issubclass(cls, SteepleError), name
