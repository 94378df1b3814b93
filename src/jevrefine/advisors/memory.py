"""`MessageChatMemoryAdvisor`: earlier turns of a conversation, put into each prompt.

```python
memory = SqliteChatMemory("chat.db")
client = ChatClient(model, advisors=[MessageChatMemoryAdvisor(memory)])
await client.prompt("My name is Ada.").advisors(conversation_id="u-42").content()
await client.prompt("What is my name?").advisors(conversation_id="u-42").content()
```
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Final

from .. import _validate, context_keys
from .._request import ChatClientRequest, ChatClientResponse
from ..exceptions import UserError
from ..memory._base import ChatMemory, check_conversation_id
from ..messages import AssistantMessage, Message, SystemMessage, UserMessage
from .chain import HIGHEST_PRECEDENCE

if TYPE_CHECKING:
    from .chain import CallAdvisorChain

__all__ = ["DEFAULT_CONVERSATION_ID", "MEMORY_ORDER", "MessageChatMemoryAdvisor"]

MEMORY_ORDER: Final = HIGHEST_PRECEDENCE + 200
"""Where chat memory sits: outside the guardrail, self-refine and the tool loop."""
DEFAULT_CONVERSATION_ID: Final = "default"
"""The conversation used when neither the prompt nor the advisor names one."""


class MessageChatMemoryAdvisor:
    """Puts a conversation's earlier messages into the prompt and records each finished turn.

    Args:
        memory: where the conversation is kept (`InMemoryChatMemory`, `SqliteChatMemory`, ...).
        conversation_id: the conversation when the prompt names none; the prompt's
            `.advisors(conversation_id="...")` (context key `conversation_id`) wins, and
            `"default"` is used when neither is given.
        order: the position in the chain.

    The history goes after the prompt's system messages and before its other messages. After a
    successful call the turn is recorded in one `add`: the prompt's last user message and the
    final answer's text — not intermediate tool rounds, and not drafts an inner advisor (such as
    self-refine) rejected. A call that fails records nothing.
    """

    name: str = "chat_memory"

    def __init__(
        self,
        memory: ChatMemory,
        *,
        conversation_id: str | None = None,
        order: int = MEMORY_ORDER,
    ) -> None:
        if not isinstance(memory, ChatMemory):
            raise UserError(
                f"MessageChatMemoryAdvisor needs a ChatMemory, got {type(memory).__name__}; "
                "pass InMemoryChatMemory() or SqliteChatMemory(path)"
            )
        self.memory = memory
        """Where the conversations are kept."""
        self.conversation_id = (
            None if conversation_id is None else check_conversation_id(conversation_id)
        )
        """The conversation when the prompt names none."""
        self.order = _validate.order(order, example=MEMORY_ORDER)
        """Position in the chain."""

    def conversation_of(self, request: ChatClientRequest) -> str:
        """The conversation of `request`: the prompt's, else the advisor's, else `"default"`."""
        from_prompt = request.context.get(context_keys.CONVERSATION_ID)
        if from_prompt is not None:
            return check_conversation_id(from_prompt)
        return self.conversation_id or DEFAULT_CONVERSATION_ID

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        """Add the history, call the rest of the chain, record the turn."""
        conversation = self.conversation_of(request)
        with_history = await self._with_history(request, conversation)
        response = await chain.next_call(with_history)
        await self._record(conversation, request, response.content)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Add the history, stream the rest of the chain, record the turn once it has ended.

        A stream that is not read to its end records nothing.
        """
        conversation = self.conversation_of(request)
        with_history = await self._with_history(request, conversation)
        text: list[str] = []
        async for chunk in chain.next_stream(with_history):
            results = chunk.chat_response.results
            if results:
                text.append(results[0].output.text)
            yield chunk
        await self._record(conversation, request, "".join(text))

    async def _with_history(
        self, request: ChatClientRequest, conversation: str
    ) -> ChatClientRequest:
        history = await self.memory.get(conversation)
        if not history:
            return request
        messages = request.prompt.messages
        system = [m for m in messages if isinstance(m, SystemMessage)]
        rest = [m for m in messages if not isinstance(m, SystemMessage)]
        prompt = request.prompt.with_messages([*system, *history, *rest])
        return request.copy(prompt=prompt, context=request.context)

    async def _record(self, conversation: str, request: ChatClientRequest, answer: str) -> None:
        turn: list[Message] = []
        user = request.prompt.last_user_message()
        if user is not None:
            turn.append(UserMessage(user.text))
        turn.append(AssistantMessage(answer))
        await self.memory.add(conversation, turn)

    def __repr__(self) -> str:
        return f"MessageChatMemoryAdvisor({self.memory!r}, order={self.order})"
