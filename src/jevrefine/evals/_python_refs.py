"""A `python` assertion's reference: checked when the case file loads, imported at first use.

A case file is code: `module:function` and `file.py:function` name functions that will get the
model's answer. So the reference is held to what a check is, and nothing of it runs early:

- `file.py` must lie inside the case file's folder (symlinks resolved first), unless the caller
  allows more (`allow_python_outside`);
- `module` must not be the standard library's (`builtins:eval`, `os:system`, `shutil:rmtree`
  would take the answer as an argument);
- the name must be a function defined in that module: a `def` (sync or async), not a class, an
  instance, a `functools.partial`, or a function imported from elsewhere.

At load time this is read from the source with `ast`, without executing it: the file (or the
module's file, found without importing its package) must parse and bind the name at its top
level with a `def` or an assignment (`check_0 = make_check(0)`); a class or an import of that
name is refused. Whatever the source cannot tell is checked at the first `load()`, which
imports the module and keeps the function (or the error).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from ..exceptions import UserError

__all__ = ["PythonReference", "parse_reference"]

_IDENTIFIER: Final = re.compile(r"[^\W\d]\w*")
_MODULE: Final = re.compile(r"[^\W\d]\w*(\.[^\W\d]\w*)*")


class PythonReference:
    """A checked `module:function` or `file.py:function`, imported at its first `load()`."""

    __slots__ = ("_error", "_function", "_lock", "file", "module", "name", "text")

    def __init__(self, text: str, *, module: str, name: str, file: Path | None) -> None:
        self.text = text
        """The reference as written."""
        self.module = module
        """The module name (for a file: the name it is imported under)."""
        self.name = name
        """The function's name."""
        self.file = file
        """The resolved `.py` file, or `None` for an importable module."""
        self._function: Callable[..., Any] | None = None
        self._error: str | None = None
        self._lock = threading.Lock()  # sync checks run in threads: import once

    def load(self) -> Callable[..., Any]:
        """Import the module (the first time) and return its function.

        Raises:
            UserError: the module does not import, or the name is no function defined in it.
        """
        with self._lock:
            if self._function is None and self._error is None:
                try:
                    self._function = self._import()
                except UserError as exc:
                    self._error = str(exc)
            if self._error is not None:
                raise UserError(self._error)
            assert self._function is not None
            return self._function

    def _import(self) -> Callable[..., Any]:
        try:
            if self.file is not None:
                spec = importlib.util.spec_from_file_location(self.module, self.file)
                if spec is None or spec.loader is None:
                    raise FileNotFoundError(f"no file {str(self.file)!r}")
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            else:
                module = importlib.import_module(self.module)
        except Exception as exc:
            raise UserError(
                f"python reference {self.text!r}: cannot import it ({type(exc).__name__}: {exc})"[
                    :400
                ]
            ) from None
        function = getattr(module, self.name, None)
        if not inspect.isfunction(function) or function.__module__ != module.__name__:
            got = "nothing" if function is None else type(function).__name__
            raise UserError(
                f"python reference {self.text!r}: {self.name!r} must be a function defined in "
                f"that module (def {self.name}(output, context): ...), got {got}"
            )
        return function


def parse_reference(text: str, folder: Path, *, allow_outside: bool) -> PythonReference:
    """Check a reference without running any of its code; `folder` is the case file's.

    Raises:
        ValueError: what is wrong with it, and what to write instead (one clause).
    """
    module_name, _, name = text.rpartition(":")
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a function name; write module:function or file.py:function"
        )
    if module_name.endswith(".py"):
        file = _inside(folder, module_name, allow_outside)
        _check_source(file, name)
        # One module name per file path: two checks.py in two folders never share a module.
        digest = hashlib.sha256(str(file).encode("utf-8", "surrogatepass")).hexdigest()[:12]
        stem = re.sub(r"\W", "_", file.stem)
        return PythonReference(
            text, module=f"_jevrefine_eval_{stem}_{digest}", name=name, file=file
        )
    if not _MODULE.fullmatch(module_name):
        raise ValueError(
            f"{module_name!r} is not a module name; write module:function, or file.py:function "
            "with a path relative to the case file"
        )
    top = module_name.partition(".")[0]
    if top in sys.stdlib_module_names or top == "builtins":
        raise ValueError(
            f"a check is a function of your own, not one of the standard library's ({top}); "
            "write it in your module or beside the case file"
        )
    source = _module_source(module_name)
    if source is not None:
        _check_source(source, name)
    return PythonReference(text, module=module_name, name=name, file=None)


def _inside(folder: Path, relative: str, allow_outside: bool) -> Path:
    base = folder.resolve()
    # Relative to the case file (as promptfoo resolves them); symlinks resolved before the check.
    file = (base / relative).resolve()
    if not allow_outside and not file.is_relative_to(base):
        raise ValueError(
            f"{str(file)!r} is outside the case file's folder {str(base)!r}; move the file "
            "beside the case file, or pass --allow-python-outside (allow_python_outside=True) "
            "if you trust it"
        )
    if not file.is_file():
        raise ValueError(
            f"no file {str(file)!r}; write file.py:function with a path relative to the case file"
        )
    return file


def _module_source(module_name: str) -> Path | None:
    """The `.py` file of `module_name`, found without importing (running) any package.

    `None` when it cannot be told that way (an extension module, a namespace package, a custom
    finder): the first `load()` checks it.

    Raises:
        ValueError: no such module.
    """
    parts = module_name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: nothing is imported
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise ValueError(
            f"no module {parts[0]!r} can be imported; install it, or write file.py:function "
            "with a path relative to the case file"
        )
    for depth in range(1, len(parts)):
        locations = spec.submodule_search_locations
        if locations is None:
            raise ValueError(f"{'.'.join(parts[:depth])!r} is a module, not a package")
        found = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), locations)
        if found is None:
            return None  # perhaps made by its package's code: left to the first load()
        spec = found
    origin = spec.origin
    if origin is None or not origin.endswith(".py"):
        return None
    return Path(origin)


def _check_source(file: Path, name: str) -> None:
    """`file` parses, and binds `name` at its top level by a `def` or an assignment."""
    try:
        tree = ast.parse(file.read_bytes(), filename=str(file))
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        raise ValueError(f"{file.name} does not parse{where}: {exc}"[:300]) from None
    except OSError as exc:
        raise ValueError(f"cannot read {str(file)!r}: {exc.strerror or exc}") from None
    kinds = {kind for bound, kind in _bindings(tree.body) if bound in (name, "*")}
    if "function" in kinds or "assigned" in kinds:
        return
    if "class" in kinds:
        raise ValueError(f"{name!r} is a class in {file.name}; a check is a function (def)")
    if "import" in kinds:
        raise ValueError(
            f"{name!r} is imported into {file.name} from elsewhere; a check is a function "
            "defined in the module it is named by"
        )
    if "star" in kinds:
        return  # `from x import *` may bind it: the first load() tells
    raise ValueError(f"{file.name} defines no function {name!r}")


def _bindings(body: list[ast.stmt]) -> Iterator[tuple[str, str]]:
    """The names a module's top level binds, with how (`function`, `class`, `import`, ...)."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, "function"
        elif isinstance(node, ast.ClassDef):
            yield node.name, "class"
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    yield "*", "star"
                else:
                    yield (alias.asname or alias.name).partition(".")[0], "import"
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        yield leaf.id, "assigned"
        elif isinstance(node, ast.If | ast.Try | ast.With):
            inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                inner.extend(handler.body)
            yield from _bindings(inner)
