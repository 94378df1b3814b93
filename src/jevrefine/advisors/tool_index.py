"""`ToolIndex`: an advisor that offers the model only the tools Jev finds applicable.

```python
client = ChatClient(model, tools=[weather, send_email, create_invoice],
                    advisors=[ToolIndex(JudgeClient())])
await client.prompt("Is it chilly outside in Oslo?").content()   # the model sees `weather` only
```

Per request, one System One call decides which of the request's tools serve its last user
message (`jevrefine.judge.tool_selection.select_tools`: a `Choice` of the tools and a `Noul` "does
any apply?"); the rest of the chain, the tool loop and each of its rounds, is sent only the
selected ones. The judging is the judge's; narrowing a request's tools is the chain's, so the
advisor lives here (it was `jevrefine.judge.ToolIndex`, a path that still works with a
`DeprecationWarning`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Final

from .. import _validate
from ..exceptions import UserError
from ..judge.tool_selection import ToolSelection, select_tools

if TYPE_CHECKING:
    from .._request import ChatClientRequest, ChatClientResponse
    from ..jev.protocol import SystemOneClient
    from ..tools import ToolCallback
    from .chain import CallAdvisorChain

__all__ = ["TOOL_INDEX_KEY", "TOOL_INDEX_ORDER", "ToolIndex"]

TOOL_INDEX_ORDER: Final = -(2**31) + 290
"""Where the index sits: just outside the tool loop (`TOOL_CALLING_ORDER`, lowest + 300), so the
loop, and every tool round of it, sees only the selected tools, and Jev is asked once."""
TOOL_INDEX_KEY: Final = "jevrefine.tool_index"
"""The request's and response's context key of the `ToolSelection`."""


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
        self.applicability_threshold = _validate.number(
            "applicability_threshold", applicability_threshold, minimum=0, maximum=1, example=0.5
        )
        """The least P(some tool applies) for any tool to be offered."""
        self.minimum_relevance = _validate.number(
            "minimum_relevance", minimum_relevance, minimum=0, maximum=1, example=0.1
        )
        """The least share of the choice a tool needs (a tool at 0 is never offered)."""
        self.max_tools = _validate.integer(
            "max_tools", max_tools, minimum=1, optional=True, example=3
        )
        """The most tools offered, or `None`."""
        self.model = _validate.text("model", model, optional=True, example="jev-latest")
        """The judge model asked (`None`: the client's default)."""
        self.order = _validate.order(order, example=TOOL_INDEX_ORDER)
        """The position in the chain."""

    async def select(self, request_text: str, tools: Sequence[ToolCallback]) -> ToolSelection:
        """Decide which of `tools` serve `request_text`: one call (none without tools).

        Raises:
            UserError: more tools than a choice can hold (255).
            JudgeError: the judging call failed.
        """
        return await select_tools(
            self.client,
            request_text,
            tools,
            applicability_threshold=self.applicability_threshold,
            minimum_relevance=self.minimum_relevance,
            max_tools=self.max_tools,
            model=self.model,
        )

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

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """Offer only the selected tools to the rest of the chain."""
        narrowed = await self._narrowed(request)
        response = await chain.next_call(narrowed)
        selection = narrowed.context[TOOL_INDEX_KEY]
        return response.copy(context={**response.context, TOOL_INDEX_KEY: selection})

    async def advise_stream(
        self, request: ChatClientRequest, chain: CallAdvisorChain
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
