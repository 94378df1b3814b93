"""Chat memory: the stores, and the advisor that puts history into prompts and records turns."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import jevrefine as jr
from jevrefine import (
    HIGHEST_PRECEDENCE,
    AssistantMessage,
    ChatClient,
    InMemoryChatMemory,
    MessageChatMemoryAdvisor,
    Prompt,
    SqliteChatMemory,
    SystemMessage,
    ToolCall,
    UserMessage,
)
from jevrefine.memory import ChatMemory
from jevrefine.testing import FunctionModel


def user_texts(prompt: Prompt) -> list[str]:
    return [m.text for m in prompt.messages if isinstance(m, UserMessage)]


def echo_history(prompt: Prompt) -> str:
    """Answers with every user text it can see, so the answer shows what history it got."""
    return "saw: " + ", ".join(user_texts(prompt))


@pytest.fixture(params=["memory", "sqlite"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> ChatMemory:
    if request.param == "memory":
        return InMemoryChatMemory(max_messages=6)
    return SqliteChatMemory(tmp_path / "chat.db", max_messages=6)


async def test_store_add_get_clear(memory: ChatMemory) -> None:
    assert isinstance(memory, ChatMemory)
    assert await memory.get("a") == []
    await memory.add("a", [UserMessage("q1"), AssistantMessage("a1")])
    await memory.add("b", [UserMessage("other")])
    assert await memory.get("a") == [UserMessage("q1"), AssistantMessage("a1")]
    await memory.clear("a")
    assert await memory.get("a") == []
    assert await memory.get("b") == [UserMessage("other")]


async def test_store_window_never_starts_with_an_answer(memory: ChatMemory) -> None:
    for i in range(5):
        await memory.add("c", [UserMessage(f"q{i}"), AssistantMessage(f"a{i}")])
    assert await memory.get("c") == [
        UserMessage("q2"),
        AssistantMessage("a2"),
        UserMessage("q3"),
        AssistantMessage("a3"),
        UserMessage("q4"),
        AssistantMessage("a4"),
    ]
    await memory.add("c", [UserMessage("q5"), AssistantMessage("a5"), AssistantMessage("extra")])
    got = await memory.get("c")
    assert got[0] == UserMessage("q4")  # a window of 6 would start with "a3": it is dropped
    assert got[-1] == AssistantMessage("extra")


async def test_store_rejects_bad_conversation_ids(memory: ChatMemory) -> None:
    with pytest.raises(jr.UserError, match="is empty: pass a non-empty id"):
        await memory.get("")


async def test_store_keeps_tool_calls_in_messages(memory: ChatMemory) -> None:
    message = AssistantMessage("", (ToolCall("1", "weather", '{"location": "Paris"}'),))
    await memory.add("t", [UserMessage("q"), message])
    assert (await memory.get("t"))[1] == message


async def test_sqlite_memory_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    client = ChatClient(
        FunctionModel(echo_history), advisors=[MessageChatMemoryAdvisor(SqliteChatMemory(path))]
    )
    await client.prompt("my name is Ada").advisors(conversation_id="u1").call()

    model = FunctionModel(echo_history)  # a new client and store on the same file: a restart
    reopened = ChatClient(model, advisors=[MessageChatMemoryAdvisor(SqliteChatMemory(path))])
    answer = await reopened.prompt("what is my name?").advisors(conversation_id="u1").content()
    assert answer == "saw: my name is Ada, what is my name?"
    assert await SqliteChatMemory(path).get("u1") == [
        UserMessage("my name is Ada"),
        AssistantMessage("saw: my name is Ada"),
        UserMessage("what is my name?"),
        AssistantMessage("saw: my name is Ada, what is my name?"),
    ]
    with sqlite3.connect(path) as connection:  # a real database file anyone can read
        (count,) = connection.execute("SELECT COUNT(*) FROM jevrefine_chat_memory").fetchone()
    connection.close()
    assert count == 4


async def test_sqlite_concurrent_writers_keep_conversations_apart(tmp_path: Path) -> None:
    store = SqliteChatMemory(tmp_path / "c.db", max_messages=None)

    async def writer(conversation: str) -> None:
        for i in range(10):
            await store.add(
                conversation, [UserMessage(f"{conversation}-{i}"), AssistantMessage("ok")]
            )

    async with anyio.create_task_group() as group:
        for name in ("a", "b", "c", "d"):
            group.start_soon(writer, name)
    for name in ("a", "b", "c", "d"):
        messages = await store.get(name)
        assert [m.text for m in messages[::2]] == [f"{name}-{i}" for i in range(10)]
    assert await store.conversation_ids() == ["a", "b", "c", "d"]


async def test_sqlite_writes_a_turn_all_or_nothing(tmp_path: Path) -> None:
    path = tmp_path / "atomic.db"
    store = SqliteChatMemory(path)
    await store.add("t", [UserMessage("first"), AssistantMessage("kept")])
    with sqlite3.connect(path) as connection:  # make the second message of the next turn fail
        connection.execute(
            "CREATE TRIGGER reject BEFORE INSERT ON jevrefine_chat_memory "
            "WHEN NEW.message LIKE '%poison%' BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
        )
    connection.close()
    with pytest.raises(sqlite3.IntegrityError, match="poisoned"):
        await store.add("t", [UserMessage("second"), AssistantMessage("poison")])
    assert await store.get("t") == [UserMessage("first"), AssistantMessage("kept")]


def test_sqlite_needs_a_file() -> None:
    with pytest.raises(jr.UserError, match="InMemoryChatMemory"):
        SqliteChatMemory(":memory:")


async def test_two_conversations_interleaved_concurrently_stay_apart(memory: ChatMemory) -> None:
    rng = random.Random(7)

    async def answer(prompt: Prompt) -> str:
        await anyio.sleep(rng.random() / 100)  # let the conversations interleave
        return echo_history(prompt)

    model = FunctionModel(answer)
    client = ChatClient(model, advisors=[MessageChatMemoryAdvisor(memory)])

    async def converse(name: str) -> None:
        for turn in range(3):
            await client.prompt(f"{name}{turn}").advisors(conversation_id=name).call()

    async with anyio.create_task_group() as group:
        group.start_soon(converse, "x")
        group.start_soon(converse, "y")
    for prompt in model.prompts:
        names = {text[0] for text in user_texts(prompt)}
        assert len(names) == 1  # no prompt mixes the two conversations
    x_messages = await memory.get("x")
    assert [m.text for m in x_messages] == [
        "x0",
        "saw: x0",
        "x1",
        "saw: x0, x1",
        "x2",
        "saw: x0, x1, x2",
    ]


async def test_history_goes_after_system_and_before_the_new_message() -> None:
    memory = InMemoryChatMemory()
    await memory.add("default", [UserMessage("old"), AssistantMessage("old answer")])
    model = FunctionModel(echo_history)
    client = ChatClient(model, system="be brief", advisors=[MessageChatMemoryAdvisor(memory)])
    await client.prompt("new").call()
    assert model.prompts[0].messages == (
        SystemMessage("be brief"),
        UserMessage("old"),
        AssistantMessage("old answer"),
        UserMessage("new"),
    )


async def test_conversation_id_from_prompt_then_constructor_then_default() -> None:
    memory = InMemoryChatMemory()
    client = ChatClient(FunctionModel(echo_history))
    await client.prompt("p").advisors(MessageChatMemoryAdvisor(memory)).call()
    advisor = MessageChatMemoryAdvisor(memory, conversation_id="ctor")
    await client.prompt("c").advisors(advisor).call()
    await client.prompt("q").advisors(advisor, conversation_id="param").call()
    assert [m.text for m in await memory.get("default")] == ["p", "saw: p"]
    assert [m.text for m in await memory.get("ctor")] == ["c", "saw: c"]
    assert [m.text for m in await memory.get("param")] == ["q", "saw: q"]


class RetryOnce:
    """An inner advisor that rejects the first draft and asks again."""

    name = "retry_once"
    order = 0

    async def advise_call(self, request: jr.ChatClientRequest, chain: Any) -> jr.ChatClientResponse:
        await chain.next_call(request)  # the rejected draft
        return await chain.next_call(request)


async def test_memory_sees_only_the_final_answer_when_an_inner_advisor_retries() -> None:
    drafts = iter(["draft one", "final answer"])
    memory = InMemoryChatMemory()
    model = FunctionModel(lambda prompt: next(drafts))
    client = ChatClient(model, advisors=[RetryOnce(), MessageChatMemoryAdvisor(memory)])
    assert await client.prompt("question").content() == "final answer"
    assert len(model.prompts) == 2
    assert await memory.get("default") == [
        UserMessage("question"),
        AssistantMessage("final answer"),
    ]


async def test_memory_does_not_record_tool_rounds() -> None:
    @jr.tool
    async def lookup() -> str:
        """Look up."""
        return "42"

    replies: Iterator[AssistantMessage | str] = iter(
        [AssistantMessage("", (ToolCall("1", "lookup", "{}"),)), "it is 42"]
    )
    memory = InMemoryChatMemory()
    model = FunctionModel(lambda prompt: next(replies))
    client = ChatClient(model, tools=[lookup], advisors=[MessageChatMemoryAdvisor(memory)])
    await client.prompt("what is it?").call()
    assert await memory.get("default") == [UserMessage("what is it?"), AssistantMessage("it is 42")]


async def test_a_failed_call_records_nothing() -> None:
    def fail(prompt: Prompt) -> str:
        raise RuntimeError("down")

    memory = InMemoryChatMemory()
    client = ChatClient(FunctionModel(fail), advisors=[MessageChatMemoryAdvisor(memory)])
    with pytest.raises(RuntimeError):
        await client.prompt("q").call()
    assert await memory.get("default") == []


async def test_streaming_records_the_streamed_answer() -> None:
    memory = InMemoryChatMemory()
    client = ChatClient(FunctionModel(echo_history), advisors=[MessageChatMemoryAdvisor(memory)])
    chunks = [c async for c in client.prompt("hello").stream()]
    assert len(chunks) > 1
    assert await memory.get("default") == [UserMessage("hello"), AssistantMessage("saw: hello")]


def test_advisor_order_and_validation(tmp_path: Path) -> None:
    advisor = MessageChatMemoryAdvisor(SqliteChatMemory(tmp_path / "x.db"))
    assert advisor.order == HIGHEST_PRECEDENCE + 200
    assert isinstance(advisor, jr.CallAdvisor)
    with pytest.raises(jr.UserError, match="ChatMemory"):
        MessageChatMemoryAdvisor(object())  # type: ignore[arg-type]
    with pytest.raises(jr.UserError, match="max_messages"):
        InMemoryChatMemory(max_messages=0)
