"""`ToolIndex`: an advisor that offers the model only the tools Jev finds applicable.

```python
client = ChatClient(model, tools=[weather, send_email, create_invoice],
                    advisors=[ToolIndex(JudgeClient())])
await client.prompt("Is it chilly outside in Oslo?").content()   # the model sees `weather` only
```

Per request, one System One call asks two questions about the last user message: a `Choice`
of the tools (each option a tool's name and description: which one serves the request?) and an
independent `Noul` (does **any** of them serve it?). A choice always ranks something first, as its
probabilities sum to 1; the second question is what lets the index say that no tool applies, and
then the model is offered none instead of a plausible wrong one. Both ride in one request, so a
search costs one call however many tools there are. Tools the choice gives no probability are
dropped; a request with one tool asks only whether that tool applies.

Every tool is an option of the choice and goes out on each request: right for the tens of tools
a request realistically holds, wrong for thousands (a choice takes at most 255 options). Put a
cheap index in front of a large catalogue and let this one choose among its shortlist.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from .. import _validate as check
from .._request import ChatClientRequest, ChatClientResponse
from ..exceptions import UserError
from ..jev.questions import MAX_CHOICE_OPTIONS, Choice, Noul
from ..jev.responses import check_answers

if TYPE_CHECKING:
    from ..jev.protocol import SystemOneClient
    from ..tools import ToolCallback

__all__ = [
    "ANY_TOOL_QUESTION_ID",
    "TOOL_INDEX_KEY",
    "TOOL_INDEX_ORDER",
    "TOOL_QUESTION_ID",
    "ToolIndex",
    "ToolMatch",
    "ToolSelection",
]

TOOL_INDEX_ORDER: Final = -(2**31) + 290
"""Where the index sits: just outside the tool loop (`TOOL_CALLING_ORDER`, lowest + 300), so the
loop, and every tool round of it, sees only the selected tools, and Jev is asked once."""
TOOL_INDEX_KEY: Final = "jevrefine.tool_index"
"""The request's and response's context key of the `ToolSelection`."""
TOOL_QUESTION_ID: Final = "tool"
"""The id of the choice: which tool serves the request."""
ANY_TOOL_QUESTION_ID: Final = "any_tool_applies"
"""The id of the noul: does any tool serve the request at all."""


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


class _Chain(Protocol):
    # The part of the advisor chain this advisor uses (the chain itself lives in advisors).
    def next_call(self, request: ChatClientRequest) -> Awaitable[ChatClientResponse]: ...

    def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]: ...


class ToolIndex:
    """An advisor: per request, one Jev call decides which of the request's tools to offer.

    Args:
        client: What answers (`JudgeClient`, or any `SystemOneClient`).
        applicability_threshold: How sure the judge must be that *some* tool fits before any is
            offered (0 to 1, default 0.5). Raise it where calling the wrong tool is worse than
            calling none.
        minimum_relevance: Drop tools below this share of the choice (0 to 1, default 0). A tool
            at exactly 0 is never offered; when none reaches it, none is.
        max_tools: Offer at most this many, the most relevant first (default: no limit).
        model: The judge model to ask (default: the client's).
        order: The position in the chain (default `TOOL_INDEX_ORDER`, outside the tool loop).

    A request without tools, or without a user message, passes through with no call. The
    selection is noted under `TOOL_INDEX_KEY` in the request's and the response's context, and
    made once per request: a retry of the same request (an outer self-refine) reuses it. A
    failing judging call raises its `JudgeError`.
    """

    name = "tool_index"

    def __init__(
        self,
        client: SystemOneClient,
        *,
        applicability_threshold: float = 0.5,
        minimum_relevance: float = 0.0,
        max_tools: int | None = None,
        model: str | None = None,
        order: int = TOOL_INDEX_ORDER,
    ) -> None:
        if not callable(getattr(client, "system_one", None)):
            raise UserError(
                f"ToolIndex needs a SystemOneClient (JudgeClient), got {type(client).__name__}"
            )
        self.client = client
        """What answers the questions."""
        self.applicability_threshold = check.number(
            "applicability_threshold", applicability_threshold, minimum=0, maximum=1, example=0.5
        )
        """The least P(some tool applies) for any tool to be offered."""
        self.minimum_relevance = check.number(
            "minimum_relevance", minimum_relevance, minimum=0, maximum=1, example=0.1
        )
        """The least share of the choice a tool needs (a tool at 0 is never offered)."""
        self.max_tools = check.integer("max_tools", max_tools, minimum=1, optional=True, example=3)
        """The most tools offered, or `None`."""
        self.model = check.text("model", model, optional=True, example="jev-latest")
        """The judge model asked (`None`: the client's default)."""
        self.order = check.integer("order", order, example=TOOL_INDEX_ORDER)
        """The position in the chain."""

    async def select(self, request_text: str, tools: Sequence[ToolCallback]) -> ToolSelection:
        """Decide which of `tools` serve `request_text`: one call (none without tools).

        Raises:
            UserError: more tools than a choice can hold (255).
            JudgeError: the judging call failed.
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
        questions = self._questions(tools)
        response = await self.client.system_one(state, questions, model=self.model)
        check_answers(response, questions)
        applicability = response.noul(ANY_TOOL_QUESTION_ID).noul
        if applicability < self.applicability_threshold:
            return ToolSelection((), applicability, asked=True)
        if len(tools) == 1:
            return ToolSelection((ToolMatch(tools[0].name, applicability),), applicability, True)
        chosen = response.choice(TOOL_QUESTION_ID)
        ranked = sorted(
            (ToolMatch(t.name, chosen.probability_of(t.name)) for t in tools),
            key=lambda m: -m.relevance,
        )
        kept = [m for m in ranked if m.relevance > 0 and m.relevance >= self.minimum_relevance]
        return ToolSelection(tuple(kept[: self.max_tools]), applicability, asked=True)

    def _questions(self, tools: tuple[ToolCallback, ...]) -> dict[str, Choice | Noul]:
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

    async def _selection(self, request: ChatClientRequest) -> ToolSelection:
        # Once per request: `scope` is shared by every copy, so an outer retry reuses it.
        memo: dict[ToolIndex, ToolSelection] = request.scope.setdefault(TOOL_INDEX_KEY, {})
        if self not in memo:
            user = request.prompt.last_user_message()
            if user is None or not request.tools:
                memo[self] = ToolSelection((), None, asked=False)
            else:
                memo[self] = await self.select(user.text, request.tools)
        return memo[self]

    async def _narrowed(self, request: ChatClientRequest) -> ChatClientRequest:
        selection = await self._selection(request)
        offered = request.tools
        if selection.asked:
            by_name = {t.name: t for t in request.tools}
            offered = tuple(by_name[name] for name in selection.names if name in by_name)
        return request.copy(tools=offered, context={**request.context, TOOL_INDEX_KEY: selection})

    async def advise_call(self, request: ChatClientRequest, chain: _Chain) -> ChatClientResponse:
        """Offer only the selected tools to the rest of the chain."""
        narrowed = await self._narrowed(request)
        response = await chain.next_call(narrowed)
        selection = narrowed.context[TOOL_INDEX_KEY]
        return response.copy(context={**response.context, TOOL_INDEX_KEY: selection})

    async def advise_stream(
        self, request: ChatClientRequest, chain: _Chain
    ) -> AsyncIterator[ChatClientResponse]:
        """As `advise_call`, for a stream: the selection is made before the first chunk."""
        narrowed = await self._narrowed(request)
        async for chunk in chain.next_stream(narrowed):
            yield chunk

    def __repr__(self) -> str:
        return (
            f"ToolIndex({self.client!r}, applicability_threshold={self.applicability_threshold}, "
            f"minimum_relevance={self.minimum_relevance}, max_tools={self.max_tools})"
        )
