"""The tool index's old module: the judging half's names, and the advisor's, deprecated here.

`ToolIndex` (the advisor that narrows a request's tools to those Jev finds applicable),
`TOOL_INDEX_ORDER` and `TOOL_INDEX_KEY` are the chain's: `jevrefine.advisors.tool_index`. The
judging half, `select_tools`, `ToolSelection`, `ToolMatch` and the question ids, is
`jevrefine.judge.tool_selection`, and its names are importable from here as before.
`from jevrefine.judge import ToolIndex` and `from jevrefine.judge.tool_index import ToolIndex`
still work, with a `DeprecationWarning` naming the new path; they will be removed.
"""

from __future__ import annotations

import warnings
from typing import Any, Final

from .tool_selection import ANY_TOOL_QUESTION_ID as ANY_TOOL_QUESTION_ID
from .tool_selection import TOOL_QUESTION_ID as TOOL_QUESTION_ID
from .tool_selection import ToolMatch as ToolMatch
from .tool_selection import ToolSelection as ToolSelection

__all__ = ["ANY_TOOL_QUESTION_ID", "TOOL_QUESTION_ID", "ToolMatch", "ToolSelection"]

MOVED: Final = ("ToolIndex", "TOOL_INDEX_ORDER", "TOOL_INDEX_KEY")
"""The advisor's names, importable from `jevrefine.judge` paths until the deprecation ends."""


def moved_to_advisors(module: str, name: str) -> Any:
    """The tool index advisor's `name`, asked of `module`, with a `DeprecationWarning`.

    The one import of the chain in the judge, made only when an old path is used: the
    deprecation of the pinned `jevrefine.judge.ToolIndex`.

    Raises:
        AttributeError: `name` is none of the moved names.
    """
    if name not in MOVED:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated: the tool index advisor belongs to the chain, import "
        f"it with 'from jevrefine.advisors.tool_index import {name}'",
        DeprecationWarning,
        stacklevel=3,
    )
    from ..advisors import tool_index

    return getattr(tool_index, name)


def __getattr__(name: str) -> Any:
    return moved_to_advisors(__name__, name)
