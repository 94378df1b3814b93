"""The package's rooms keep their import rules (INTERFACES.md, "Package layout").

`jevrefine.jev` is the wire side only: it never imports models, advisors, the judge or the client.
`jevrefine.judge` never imports advisors, the client or its request; `jevrefine.evals` never
imports the CLI; the fan-out helper on the low floor imports nothing above it. Below the models
and the chain, nothing imports them: telemetry, the wire (`_http`), the rate limiter, messages,
structured output and tools know no model type and no advisor. And no two files import each
other, however indirectly (a circle of files). Checked on the source (every `import`, also inside
functions and `TYPE_CHECKING` blocks), not on what happens to be loaded.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import jevrefine

PACKAGE = Path(jevrefine.__file__).parent

_CHAIN = ("advisors", "client", "_request", "batch", "cli", "evals")
"""The advisor chain and what is built on it."""
_UP_FROM_BELOW = ("models", "judge", "streaming", *_CHAIN)
"""What the floors below the models never import."""

RULES = {
    "jev": ("models", "advisors", "judge", "client", "cli", "evals", "batch", "streaming"),
    "judge": ("advisors", "client", "_request", "cli", "evals", "batch"),
    "evals": ("cli",),
    "_fanout": ("jev", "judge", "models", "advisors", "client", "cli", "evals", "batch"),
    "models": _CHAIN,
    "telemetry": ("jev", "tools", *_UP_FROM_BELOW),
    "_http": ("rate_limit", "telemetry", "jev", *_UP_FROM_BELOW),
    "rate_limit": ("jev", "telemetry", *_UP_FROM_BELOW),
    "messages": ("structured", "tools", "jev", "telemetry", *_UP_FROM_BELOW),
    "structured": ("tools", "jev", "telemetry", *_UP_FROM_BELOW),
    "tools": ("jev", *_UP_FROM_BELOW),
}

ALLOWED = {
    # The pinned `from jevrefine.judge import ToolIndex` keeps working, with a
    # DeprecationWarning, through one lazy import of the advisor (`moved_to_advisors`); it goes
    # with the deprecation.
    "judge/tool_index.py": {"advisors"},
}


def _imported_rooms(path: Path) -> set[str]:
    """The top-level rooms of jevrefine that a module imports, resolved from relative imports."""
    module = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = module[:-1]  # a module's package; for __init__.py, the package itself
    rooms: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = (*base, *(node.module or "").split(".")) if node.module else base
                names = [target] if node.module else [(*base, a.name) for a in node.names]
            else:
                names = [tuple((node.module or "").split("."))]
        elif isinstance(node, ast.Import):
            names = [tuple(a.name.split(".")) for a in node.names]
        else:
            continue
        for name in names:
            if len(name) > 1 and name[0] == "jevrefine":
                rooms.add(name[1])
    return rooms


def _modules_of(room: str) -> list[Path]:
    path = PACKAGE / room
    return sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]


@pytest.mark.parametrize("room", sorted(RULES))
def test_a_room_never_imports_what_its_rule_forbids(room: str) -> None:
    broken = {}
    for path in _modules_of(room):
        name = str(path.relative_to(PACKAGE))
        forbidden = _imported_rooms(path).intersection(RULES[room]) - ALLOWED.get(name, set())
        if forbidden:
            broken[name] = sorted(forbidden)
    assert broken == {}


def test_the_rule_checker_sees_relative_and_absolute_imports() -> None:
    # The checker itself must be able to fail: it finds what real modules import, both ways.
    assert _imported_rooms(PACKAGE / "judge" / "_judge.py") >= {"jev"}
    assert "models" in _imported_rooms(PACKAGE / "judge" / "model_judge.py")


def test_no_cli_module_is_left_at_the_top_level() -> None:
    assert sorted(p.name for p in PACKAGE.glob("_cli*.py")) == []
    assert (PACKAGE / "cli" / "__init__.py").is_file()


def _module_file(parts: tuple[str, ...]) -> Path | None:
    base = PACKAGE.parent.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return base / "__init__.py" if (base / "__init__.py").is_file() else None


def _imported_files(path: Path) -> set[Path]:
    """The files of jevrefine that a module imports (a submodule's file, else the package's)."""
    module = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = module[:-1]
    found: set[Path | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            target = (*base, *node.module.split(".")) if node.module else base
            for alias in node.names:
                found.add(_module_file((*target, alias.name)) or _module_file(target))
        elif isinstance(node, ast.Import):
            found.update(_module_file(tuple(a.name.split("."))) for a in node.names)
    return {f for f in found if f is not None and f != path and PACKAGE in f.parents}


def _circles(graph: dict[Path, set[Path]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one file (Tarjan), as package paths."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    circles: list[frozenset[str]] = []

    def visit(node: Path) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(str(member.relative_to(PACKAGE)))
                if member == node:
                    break
            if len(group) > 1:
                circles.append(frozenset(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_two_files_import_each_other() -> None:
    graph = {path: _imported_files(path) for path in PACKAGE.rglob("*.py")}
    assert _circles(graph) == []


def test_the_circle_finder_sees_a_circle() -> None:
    # It must be able to fail: a circle through three files, and one through a package.
    a, b, c, d = (PACKAGE / name for name in ("a.py", "b.py", "c.py", "d/__init__.py"))
    assert _circles({a: {b}, b: {c}, c: {a}, d: set()}) == [frozenset({"a.py", "b.py", "c.py"})]
    assert _imported_files(PACKAGE / "judge" / "tool_index.py") >= {
        PACKAGE / "advisors" / "tool_index.py"
    }
