"""The full chain on the fakes, with the probes the cancellation and load tests read.

ChatClient -> chat memory (SQLite) -> self-refine (Judge on `JudgeClient` / `FakeJevServer`) ->
tool loop (one async tool) -> `OpenAIChatModel` on `FakeOpenAIServer`. Each request first asks
for the tool, then answers with the tool's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

import jevrefine as jr
from jevrefine._http import ConnectionPool
from jevrefine.advisors.memory import MessageChatMemoryAdvisor
from jevrefine.advisors.self_refine import JudgeErrorPolicy, SelfRefineAdvisor
from jevrefine.jev import JudgeClient, Noul, RetryPolicy
from jevrefine.judge import Judge
from jevrefine.judge.criteria import noul
from jevrefine.memory import SqliteChatMemory
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeJevServer, FakeOpenAIServer
from jevrefine.testing._openai_server import FakeToolCall, OpenAIReply


@dataclass
class Probes:
    """Where a call is: flags set by the model server, the tool, the judge server, the backoff."""

    model: threading.Event = field(default_factory=threading.Event)
    tool: threading.Event = field(default_factory=threading.Event)
    judge: threading.Event = field(default_factory=threading.Event)
    backoff: threading.Event = field(default_factory=threading.Event)
    tool_started: int = 0
    tool_finished: int = 0

    def get(self, name: str) -> threading.Event:
        event: threading.Event = getattr(self, name)
        return event


def model_reply(probes: Probes, latency: float) -> Callable[[dict[str, Any]], Any]:
    """Ask for the tool first; once its result is in, answer with it."""

    async def reply(body: dict[str, Any]) -> OpenAIReply:
        probes.model.set()
        await asyncio.sleep(latency)  # runs on the server's own loop
        messages = body["messages"]
        last = messages[-1]
        if last.get("role") == "tool":
            return OpenAIReply(content=f"The answer is {last.get('content')}.")
        return OpenAIReply(tool_calls=[FakeToolCall("lookup", {"key": "k"})])

    return reply


def judge_answer(probes: Probes, latency: float) -> Callable[[Any, dict[str, Any]], Any]:
    async def answer(state: Any, questions: dict[str, Any]) -> dict[str, Any]:
        probes.judge.set()
        await asyncio.sleep(latency)
        return {"grounded": 0.9}

    return answer


@dataclass
class Chain:
    """The client and everything whose state the tests inspect."""

    client: jr.ChatClient
    model: OpenAIChatModel
    judge_client: JudgeClient
    memory: SqliteChatMemory
    probes: Probes
    model_server: FakeOpenAIServer
    judge_server: FakeJevServer


@contextlib.asynccontextmanager
async def full_chain(
    db: Path,
    *,
    latency: float = 0.01,
    tool_delay: float = 0.01,
    backoff: float = 0.02,
    pool: int = 100,
    max_retries: int = 2,
    model_timeout: float | None = None,
    judge_error_policy: JudgeErrorPolicy = JudgeErrorPolicy.FAIL_OPEN,
) -> AsyncIterator[Chain]:
    """Start both fakes and build the chain; close everything on exit."""
    probes = Probes()

    @jr.tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        probes.tool.set()
        probes.tool_started += 1
        await anyio.sleep(tool_delay)
        probes.tool_finished += 1
        return f"value of {key}"

    async def sleep(seconds: float) -> None:
        probes.backoff.set()
        await anyio.sleep(backoff)

    async with (
        FakeOpenAIServer(model_reply(probes, latency)) as model_server,
        FakeJevServer(judge_answer(probes, latency)) as judge_server,
    ):
        model = OpenAIChatModel(
            "m",
            base_url=model_server.base_url,
            api_key="sk-test",
            max_retries=max_retries,
            timeout=model_timeout,
        )
        # The wire's policy sleeps its backoff; make it short so retries fit in the test.
        wire: Any = model._wire
        wire._policy = dataclasses.replace(
            wire._policy, initial_backoff=backoff, max_backoff=backoff, jitter=0.0
        )
        judge_client = JudgeClient(
            "jev-test",
            base_url=judge_server.base_url,
            retry=RetryPolicy(max_retries=max_retries, sleep=sleep),
            max_concurrency=pool,
            total_timeout=None,
        )
        judge = Judge(judge_client, [noul("grounded", Noul("Is it grounded?"), 0.5)])
        memory = SqliteChatMemory(db, max_messages=None)
        client = jr.ChatClient(
            model,
            tools=[lookup],
            advisors=[
                MessageChatMemoryAdvisor(memory),
                SelfRefineAdvisor(judge, judge_error_policy=judge_error_policy),
            ],
        )
        try:
            yield Chain(client, model, judge_client, memory, probes, model_server, judge_server)
        finally:
            await model.aclose()
            await judge_client.aclose()


def new_tasks(before: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """Tasks started since `before` that still run (the current one aside)."""
    current = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t not in before and t is not current and not t.done()}


async def assert_nothing_left(
    before: set[asyncio.Task[Any]], model: OpenAIChatModel, jev: JudgeClient
) -> None:
    """No task started since `before` still runs and neither pool holds a connection.

    Waited for (up to 5 s): a cancelled handler's task, or a generator closed by the event
    loop's finalizer, ends on a later tick than the cancellation the test saw.
    """
    with anyio.fail_after(5):
        while new_tasks(before) or model_pool_busy(model):  # noqa: ASYNC110
            await anyio.sleep(0.01)
    assert judge_pool_in_use(jev) == 0


def judge_pool_in_use(client: JudgeClient) -> int:
    """Connections of the judge's transport that are taken (not idle, not free)."""
    transport: Any = client._wire._pool
    assert isinstance(transport, ConnectionPool)
    slots = transport._slots
    if slots is None:
        return 0
    return int(transport._max_connections - slots.value)


def judge_idle_connections(client: JudgeClient) -> int:
    transport: Any = client._wire._pool
    return sum(len(stack) for stack in transport._idle.values())


def model_pool_busy(model: OpenAIChatModel) -> int:
    """Connections of the model's HTTP clients that a request holds (every pool: the lean
    transport of whole responses and the SDK's httpx pool of streams)."""
    from support import pool_connections

    return pool_connections(model)[0]


async def memory_is_consistent(memory: SqliteChatMemory) -> tuple[int, bool]:
    """(turns, whether every conversation is whole user/assistant pairs)."""
    turns = 0
    for conversation in await memory.conversation_ids():
        messages = await memory.get(conversation)
        if len(messages) % 2:
            return turns, False
        for user, answer in zip(messages[::2], messages[1::2], strict=True):
            if not (isinstance(user, jr.UserMessage) and isinstance(answer, jr.AssistantMessage)):
                return turns, False
            turns += 1
    return turns, True
