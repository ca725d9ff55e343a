"""The import graph of `burrow/`: no cycle at any depth, and each layer of DESIGN.md §1
imports only those below it. Imports are read from the source (inside functions too: a
lazy import is still a dependency), so this holds without importing anything."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "burrow"

# DESIGN.md §1, from the top: a layer may import the ones after it, never those before.
LAYERS = ("burrow.api", "burrow.runs", "burrow.tools", "burrow.llm", "burrow.sandbox")
# Inside `runs/`, the same: the service, the conversation's machine, one run, the log.
RUNS = (
    "burrow.runs.conversations",
    "burrow.runs.workspace",
    "burrow.runs.loop",
    "burrow.runs.journal",
)
NEVER = {
    # An editor's agent that is a client of the HTTP API: nothing of the server inside it.
    "burrow.acp": (
        "burrow.api",
        "burrow.runs",
        "burrow.tools",
        "burrow.llm",
        "burrow.sandbox",
        "burrow.store",
    ),
    "burrow.store": ("burrow.api", "burrow.runs", "burrow.tools", "burrow.sandbox"),
}


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [[alias.name] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            candidates = [[f"{base}.{alias.name}", base] for alias in node.names]
        else:
            continue
        for options in candidates:
            for option in options:
                module = _known_prefix(option, known)
                if module is not None and module != name:
                    targets.add(module)
                    break
    return targets


def _known_prefix(dotted: str, known: dict[str, Path]) -> str | None:
    while dotted:
        if dotted in known:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return None


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def in_layer(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def test_no_import_cycle_at_any_depth() -> None:
    assert cycles(graph()) == []


def test_runs_is_only_its_four_folders() -> None:
    loose = [m for m in modules() if m.startswith("burrow.runs.") and not m.startswith(RUNS)]
    assert loose == []


def test_a_cycle_is_found_where_there_is_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_each_layer_imports_only_those_below_it() -> None:
    upward = []
    for module, targets in graph().items():
        for order in (LAYERS, RUNS):
            for rank, layer in enumerate(order):
                if in_layer(module, layer):
                    above = order[:rank]
                    upward += [(module, t) for t in targets if any(in_layer(t, a) for a in above)]
        for layer, forbidden in NEVER.items():
            if in_layer(module, layer):
                upward += [(module, t) for t in targets if any(in_layer(t, f) for f in forbidden)]
    assert upward == []


SERVICE = "burrow.runs.conversations.service"


def test_the_api_reaches_the_application_layer_only_through_its_service() -> None:
    """`burrow/api` names nothing of runs/conversations but the service module (which also
    lists the layer's errors and views the API may name)."""
    reaching = [
        (module, target)
        for module, targets in graph().items()
        if in_layer(module, "burrow.api")
        for target in targets
        if in_layer(target, "burrow.runs.conversations") and target != SERVICE
    ]
    assert reaching == []


def test_no_route_imports_another_route() -> None:
    routes = "burrow.api.routes"
    crossing = [
        (module, target)
        for module, targets in graph().items()
        if in_layer(module, routes) and module != routes
        for target in targets
        if in_layer(target, routes) and target != routes
    ]
    assert crossing == []


def test_no_route_touches_the_runtimes_pool_checkpoints_approvals_or_journal() -> None:
    """The service is the door: attribute chains past it are what the issue's grep finds."""
    reach = re.compile(r"runtime\.(sandboxes|checkpoints|approvals|journal)|svc\.journal")
    found = [
        f"{path.relative_to(ROOT.parent)}:{n}"
        for path in (ROOT / "api").rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if reach.search(line)
    ]
    assert found == []


def test_the_composition_root_imports_nothing_above_it() -> None:
    """services.py builds what the API and the preview proxy run on: it imports neither."""
    above = [
        t
        for t in graph()["burrow.services"]
        if in_layer(t, "burrow.api") or in_layer(t, "burrow.preview")
    ]
    assert above == []
