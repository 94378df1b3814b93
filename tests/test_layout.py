"""The package's rooms keep their import rules (INTERFACES.md, "Package layout").

`jevrefine.jev` is the wire side only: it never imports models, advisors, the judge or the client.
`jevrefine.judge` never imports advisors or the client; `jevrefine.evals` never imports the CLI;
the fan-out helper on the low floor imports nothing above it. Checked on the source (every
`import`, also inside functions and `TYPE_CHECKING` blocks), not on what happens to be loaded.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import jevrefine

PACKAGE = Path(jevrefine.__file__).parent

RULES = {
    "jev": ("models", "advisors", "judge", "client", "cli", "evals", "batch", "streaming"),
    "judge": ("advisors", "client", "cli", "evals", "batch"),
    "evals": ("cli",),
    "_fanout": ("jev", "judge", "models", "advisors", "client", "cli", "evals", "batch"),
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
    broken = {
        str(path.relative_to(PACKAGE)): sorted(_imported_rooms(path).intersection(RULES[room]))
        for path in _modules_of(room)
    }
    assert {name: rooms for name, rooms in broken.items() if rooms} == {}


def test_the_rule_checker_sees_relative_and_absolute_imports() -> None:
    # The checker itself must be able to fail: it finds what real modules import, both ways.
    assert _imported_rooms(PACKAGE / "judge" / "_judge.py") >= {"jev"}
    assert "models" in _imported_rooms(PACKAGE / "judge" / "model_judge.py")


def test_no_cli_module_is_left_at_the_top_level() -> None:
    assert sorted(p.name for p in PACKAGE.glob("_cli*.py")) == []
    assert (PACKAGE / "cli" / "__init__.py").is_file()
