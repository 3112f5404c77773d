"""The client speaks only the published contract: every path it requests, and the method
it requests it with, is an operation of contracts/openapi/scheduler.yaml."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

ROOT = Path(__file__).parent.parent.parent
CLIENT = ROOT / "appliance" / "client"
SPEC = ROOT / "contracts" / "openapi" / "scheduler.yaml"
# How the client builds an id's path (appliance/client/schedules.py, runs.py).
BUILDERS = {"schedule_path": "/v1/schedules/{schedule_id}", "run_path": "/v1/runs/{run_id}"}
VERBS = {"get", "post", "patch", "delete", "stream"}


def operations() -> set[tuple[str, str]]:
    paths = yaml.safe_load(SPEC.read_text(encoding="utf-8"))["paths"]
    return {(verb, path) for path, item in paths.items() for verb in item if verb in VERBS}


def requested() -> set[tuple[str, str]]:
    """(method, path) of each ``client.get("/v1/…")`` or ``client.post(schedule_path(i,
    "pause"))`` call in the client's modules."""
    found = set()
    for module in [*CLIENT.glob("*.py"), ROOT / "appliance" / "cli" / "remote.py"]:
        tree = ast.parse(module.read_text(encoding="utf-8"))
        constants = _path_constants(tree)
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            if isinstance(call.func, ast.Name) and call.func.id == "read_list":
                verb, target = "get", call.args[1]  # read_list(client, path, …) pages a GET
            elif _client_call(call.func) and call.args:
                verb, target = call.func.attr, call.args[0]
            else:
                continue
            path = _path(target, module, constants)
            if path is not None:
                found.add(("get" if verb == "stream" else verb, path))
    return found


def _client_call(func: ast.expr) -> bool:
    """``client.get(…)`` or ``self.client.stream(…)``: a method of the Client."""
    if not isinstance(func, ast.Attribute) or func.attr not in VERBS:
        return False
    owner = func.value
    return (isinstance(owner, ast.Name) and owner.id == "client") or (
        isinstance(owner, ast.Attribute) and owner.attr == "client"
    )


def _path_constants(tree: ast.Module) -> dict[str, str]:
    """The module's own ``NAME: Final = "/v1/…"`` paths."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Constant):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            value = node.value.value
            for target in targets:
                if isinstance(target, ast.Name) and str(value).startswith("/v1/"):
                    found[target.id] = str(value)
    return found


def _path(node: ast.expr, module: Path, constants: dict[str, str]) -> str | None:
    """The contract path ``node`` names; None for the parameter of a helper (``path``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        assert node.value.startswith("/v1/"), f"{module.name}: {node.value}"
        return node.value
    if isinstance(node, ast.Name):
        named = {
            "STREAM_PATH": "/v1/events/stream",
            "runs_path": BUILDERS["schedule_path"] + "/runs",
            **constants,
        }
        assert node.id in named or node.id == "path", f"{module.name}: a path from {node.id}"
        return named.get(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        base = BUILDERS.get(node.func.id)
        if base is not None and len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
            return f"{base}/{node.args[1].value}"
        return base
    return None


def test_every_request_of_the_client_is_an_operation_of_the_contract() -> None:
    made = requested()
    assert len(made) >= 14  # the scan found the calls at all
    assert sorted(made - operations()) == []
