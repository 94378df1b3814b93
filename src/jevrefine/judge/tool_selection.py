"""Which of a request's tools serve it: one System One call, read into a `ToolSelection`.

```python
selection = await select_tools(JudgeClient(), "Is it chilly outside in Oslo?", tools)
selection.names   # ["current_weather"]
```

The judging half of the tool index (`jevrefine.advisors.ToolIndex`, the advisor that narrows a
request's tools to the selection, is the chain-side half). One call asks two questions about
the request's text: a `Choice` of the tools (each option a tool's name and description: which
one serves the request?) and an independent `Noul` (does **any** of them serve it?). A choice
always ranks something first, as its probabilities sum to 1; the second question is what lets
the index say that no tool applies, and then the model is offered none instead of a plausible
wrong one. Both ride in one request, so a search costs one call however many tools there are.
Tools the choice gives no probability are dropped; with one tool only whether it applies is
asked.

Every tool is an option of the choice and goes out on each request: right for the tens of tools
a request realistically holds, wrong for thousands (a choice takes at most 255 options). Put a
cheap index in front of a large catalogue and let this one choose among its shortlist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from ..exceptions import UserError
from ..jev.questions import MAX_CHOICE_OPTIONS, Choice, Noul
from ..jev.responses import check_answers

if TYPE_CHECKING:
    from ..jev.protocol import SystemOneClient

__all__ = [
    "ANY_TOOL_QUESTION_ID",
    "TOOL_QUESTION_ID",
    "OfferedTool",
    "ToolMatch",
    "ToolSelection",
    "select_tools",
]

TOOL_QUESTION_ID: Final = "tool"
"""The id of the choice: which tool serves the request."""
ANY_TOOL_QUESTION_ID: Final = "any_tool_applies"
"""The id of the noul: does any tool serve the request at all."""


class OfferedTool(Protocol):
    """What the judge is told about a tool: its name and description (any `ToolCallback`)."""

    @property
    def name(self) -> str:
        """The tool's name, the option's label."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, the option's description."""
        ...


@dataclass(frozen=True, slots=True)
class ToolMatch:
    """One selected tool and its relevance."""

    name: str
    """The tool's name."""
    relevance: float
    """Its share of the choice's probability (with one tool: P(it applies))."""


@dataclass(frozen=True, slots=True)
class ToolSelection:
    """What the index decided for one request."""

    matches: tuple[ToolMatch, ...]
    """The tools offered, most relevant first; empty when none applies."""
    applicability: float | None
    """P(some tool serves the request); `None` when nothing was asked (no tools, no user text)."""
    asked: bool
    """Whether a judging call was made."""

    @property
    def names(self) -> list[str]:
        """The offered tools' names, most relevant first."""
        return [m.name for m in self.matches]


async def select_tools(
    client: SystemOneClient,
    request_text: str,
    tools: Sequence[OfferedTool],
    *,
    applicability_threshold: float,
    minimum_relevance: float,
    max_tools: int | None,
    model: str | None,
) -> ToolSelection:
    """Decide which of `tools` serve `request_text`: one call to `client` (none without tools).

    The settings are `ToolIndex`'s, checked there: a selection is empty when P(some tool
    applies) is below `applicability_threshold`; a tool below `minimum_relevance` of the choice
    (or at 0) is dropped; at most `max_tools` are kept, the most relevant first.

    Raises:
        UserError: more tools than a choice can hold (255).
        JudgeError: the judging call failed, or its answers do not fit the questions.
    """
    tools = tuple(tools)
    if not tools:
        return ToolSelection((), None, asked=False)
    if len(tools) > MAX_CHOICE_OPTIONS:
        raise UserError(
            f"ToolIndex got {len(tools)} tools; a choice holds at most {MAX_CHOICE_OPTIONS}: "
            "narrow them first with a cheap index (keywords, embeddings) and let this one "
            "pick among its shortlist"
        )
    state = {
        "user_request": request_text,
        "tools": [{"name": t.name, "description": t.description} for t in tools],
    }
    questions = _questions(tools)
    response = await client.system_one(state, questions, model=model)
    check_answers(response, questions)
    applicability = response.noul(ANY_TOOL_QUESTION_ID).noul
    if applicability < applicability_threshold:
        return ToolSelection((), applicability, asked=True)
    if len(tools) == 1:
        return ToolSelection((ToolMatch(tools[0].name, applicability),), applicability, True)
    chosen = response.choice(TOOL_QUESTION_ID)
    ranked = sorted(
        (ToolMatch(t.name, chosen.probability_of(t.name)) for t in tools),
        key=lambda m: -m.relevance,
    )
    kept = [m for m in ranked if m.relevance > 0 and m.relevance >= minimum_relevance]
    return ToolSelection(tuple(kept[:max_tools]), applicability, asked=True)


def _questions(tools: tuple[OfferedTool, ...]) -> dict[str, Choice | Noul]:
    if len(tools) == 1:
        # A choice of one option is no question: only whether that tool applies.
        return {
            ANY_TOOL_QUESTION_ID: Noul(
                "Does the tool listed in `tools` serve what `user_request` asks for?"
            )
        }
    return {
        TOOL_QUESTION_ID: Choice(
            "Which of the tools listed in `tools` best serves what `user_request` asks for?",
            options={t.name: t.description or None for t in tools},
        ),
        ANY_TOOL_QUESTION_ID: Noul(
            "Does any of the tools listed in `tools` serve what `user_request` asks for?"
        ),
    }
