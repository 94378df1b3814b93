"""The error trees drawn in `exceptions.py` and `jev/errors.py` are the classes' own.

Every public error class of the package (a subclass of `JevrefineError`, in any module) is drawn
in one of the two diagrams, each under a class it really derives from, and nothing is drawn that
is not a class of the package. A class added without its line, or moved in the tree, fails here.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import jevrefine
from jevrefine import exceptions
from jevrefine.exceptions import JevrefineError
from jevrefine.jev import errors as jev_errors

_NODE = re.compile(r"^(?P<indent>(?:│   |    )*)(?:├── |└── )(?P<name>[A-Z]\w+)")
_ROOT = re.compile(r"^(?P<name>[A-Z]\w+)")


def _drawing(module: object) -> list[tuple[str, str | None]]:
    """(class name, drawn parent) for each node of the module docstring's tree."""
    doc = inspect.getdoc(module) or ""
    block = doc.split("```", 2)[1].strip("\n").splitlines()
    nodes: list[tuple[str, str | None]] = []
    parents: list[str] = []  # the drawn ancestors of the next node, by depth
    for line in block:
        root, node = _ROOT.match(line), _NODE.match(line)
        if root is not None:
            parents = [root.group("name")]
            nodes.append((root.group("name"), None))
        elif node is not None:
            depth = len(node.group("indent")) // 4 + 1
            parents = [*parents[:depth], node.group("name")]
            nodes.append((node.group("name"), parents[depth - 1]))
    return nodes


def _error_classes() -> dict[str, type[BaseException]]:
    """Every public subclass of `JevrefineError` defined in the package, by name."""
    for info in pkgutil.walk_packages(jevrefine.__path__, "jevrefine."):
        if info.name.startswith("jevrefine.pytest") or info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
    found: dict[str, type[BaseException]] = {}
    todo: list[type[BaseException]] = [JevrefineError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("jevrefine") and not cls.__name__.startswith("_"):
            found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


DRAWINGS = {"exceptions": _drawing(exceptions), "jev.errors": _drawing(jev_errors)}


def test_every_error_class_is_drawn() -> None:
    drawn = {name for nodes in DRAWINGS.values() for name, _ in nodes}
    assert sorted(set(_error_classes()) - drawn) == []


@pytest.mark.parametrize("where", sorted(DRAWINGS))
def test_each_drawn_class_is_one_under_a_class_it_derives_from(where: str) -> None:
    classes = _error_classes()
    wrong = []
    for name, parent in DRAWINGS[where]:
        cls = classes.get(name)
        if cls is None:
            wrong.append(f"{name}: no such error class")
        elif parent is not None and parent not in [base.__name__ for base in cls.__bases__]:
            wrong.append(f"{name}: drawn under {parent}, derives from {cls.__bases__}")
    assert wrong == []


def test_the_jev_tree_hangs_under_the_root_where_the_main_tree_says() -> None:
    assert DRAWINGS["jev.errors"][0] == ("JudgeError", None)
    assert ("JudgeError", "JevrefineError") in DRAWINGS["exceptions"]


def test_the_reader_of_the_drawing_sees_depth() -> None:
    # It must be able to fail: a node one level down has the node above it as its parent.
    nodes = dict(DRAWINGS["exceptions"])
    assert nodes["ContextOverflowError"] == "ModelHTTPError"
    assert nodes["ModelHTTPError"] == "ModelError"
    assert nodes["ModelChecksumError"] == "LocalModelUnavailableError"
