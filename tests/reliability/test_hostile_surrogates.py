"""RT-10: a lone surrogate in a model's answer is decided once, at the adapter.

Promise: a 200 whose answer holds `\\ud800` (a JSON escape with no pair) reaches the caller with
U+FFFD in its place, from both adapters, call and stream; so nothing downstream meets a string
that cannot be encoded: `SqliteChatMemory` stores the turn, `SqliteFtsRetriever` indexes the
answer, a Jev judge judges it, and the next model call (which sends it back as history) is sent.
Against a raw asyncio peer on 127.0.0.1 that writes the escape into its JSON.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from _hostile_model_peer import HostilePeer, raw, sse, sse_events

import jevrefine as jr
from jevrefine.advisors.memory import MessageChatMemoryAdvisor
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, JudgeInput, noul
from jevrefine.memory import SqliteChatMemory
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.retrieval import Document, SqliteFtsRetriever
from jevrefine.testing import FakeJevServer

LONE = rb"bad \ud800 answer"
FIXED = "bad \ufffd answer"
KEY = "sk-surrogate-0123456789"


def _openai_answer() -> bytes:
    return (
        b'{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,'
        b'"message":{"role":"assistant","content":"' + LONE + b'"},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":1,"completion_tokens":1}}'
    )


def _anthropic_answer() -> bytes:
    return (
        b'{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":'
        b'"text","text":"' + LONE + b'"}],"stop_reason":"end_turn","usage":{"input_tokens":1,'
        b'"output_tokens":1}}'
    )


def _model(kind: str, peer: HostilePeer) -> jr.ChatModel:
    if kind == "openai":
        return OpenAIChatModel("m", base_url=peer.url + "/v1", api_key=KEY, max_retries=0)
    return AnthropicChatModel("m", base_url=peer.url, api_key=KEY, max_retries=0)


@pytest.fixture
async def peer() -> HostilePeer:  # type: ignore[misc]
    async with HostilePeer() as server:
        yield server


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_the_answer_holds_u_fffd_and_everything_downstream_takes_it(
    kind: str, peer: HostilePeer, tmp_path: Path
) -> None:
    answer = _openai_answer() if kind == "openai" else _anthropic_answer()
    peer.script(raw(answer))
    memory = SqliteChatMemory(tmp_path / "memory.db")
    async with (
        _model(kind, peer) as model,
        FakeJevServer(lambda state, questions: {"ok": 0.9}) as jev_server,
        JudgeClient("jev-key-0123456789", base_url=jev_server.base_url) as jev,
    ):
        client = jr.ChatClient(model, advisors=[MessageChatMemoryAdvisor(memory)])
        spec = client.prompt("hello").advisors(conversation_id="c1")
        with anyio.fail_after(10):
            text = await spec.content()
            assert text == FIXED
            verdict = await Judge(jev, [noul("ok", Noul("Is it fine?"))]).evaluate(
                JudgeInput("hello", text)
            )
            assert verdict.passed
            # The next call sends the stored turn back as history: it must be sendable.
            assert await spec.content() == FIXED
        stored = await memory.get("c1")
        assert FIXED in [m.text for m in stored]
        retriever = SqliteFtsRetriever(tmp_path / "docs.db")
        await retriever.add([Document("d1", text)])


async def test_a_streamed_answer_holds_u_fffd_on_both_adapters(peer: HostilePeer) -> None:
    chunk = (
        b'{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"' + LONE + b'"},'
        b'"finish_reason":null}]}'
    )
    done = b'{"id":"c1","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
    peer.script(sse([chunk, done, b"[DONE]"]))
    async with _model("openai", peer) as model:
        with anyio.fail_after(10):
            pieces = [c.text async for c in model.stream(jr.Prompt((jr.UserMessage("hi"),)))]
    assert "".join(pieces) == FIXED
    delta = (
        b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"'
        + LONE
        + b'"}}'
    )
    peer.script(
        sse_events(
            [
                (
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {
                            "id": "m1",
                            "type": "message",
                            "role": "assistant",
                            "model": "m",
                            "content": [],
                            "usage": {"input_tokens": 1, "output_tokens": 0},
                        },
                    },
                ),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                ("content_block_delta", delta),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn"},
                        "usage": {"output_tokens": 1},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )
    )
    async with _model("anthropic", peer) as model:
        with anyio.fail_after(10):
            pieces = [c.text async for c in model.stream(jr.Prompt((jr.UserMessage("hi"),)))]
    assert "".join(pieces) == FIXED
