"""The tool loop end to end through the real adapters and the scripted OpenAI/Anthropic servers."""

from __future__ import annotations

import json

import anyio

from jevrefine import ChatClient, ToolCallingAdvisor, tool
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeAnthropicServer, FakeOpenAIServer


@tool
async def weather(city: str) -> str:
    """Current weather for a city."""
    await anyio.sleep(0.01)
    return f"sunny in {city}"


@tool
async def broken() -> str:
    """Always fails."""
    raise RuntimeError("backend down")


async def test_openai_parallel_calls_errors_and_streaming() -> None:
    async with FakeOpenAIServer() as server:
        server.script(
            {
                "tool_calls": [
                    {"name": "weather", "arguments": {"city": "Paris"}, "id": "call_a"},
                    {"name": "broken", "arguments": {}, "id": "call_b"},
                    {"name": "weather", "arguments": '{"city": 1}', "id": "call_c"},
                ]
            },
            {"tool_calls": [{"name": "weather", "arguments": {"city": "Rome"}, "id": "call_a"}]},
            "Paris and Rome are sunny.",
        )
        async with OpenAIChatModel(
            "gpt-test", base_url=server.base_url, api_key="sk-test", max_retries=0
        ) as model:
            client = ChatClient(model, tools=[weather, broken])
            chunks = [c async for c in client.prompt("Paris and Rome?").stream()]
        assert "".join(chunks) == "Paris and Rome are sunny."
        first, second, third = server.chat_requests
        assert all(r["stream"] is True for r in server.chat_requests)
        assert sorted(t["function"]["name"] for t in first["tools"]) == ["broken", "weather"]
        assert [t["id"] for t in second["messages"][-4]["tool_calls"]] == [
            "call_a",
            "call_b",
            "call_c",
        ]
        results = second["messages"][-3:]
        assert [(m["role"], m["tool_call_id"]) for m in results] == [
            ("tool", "call_a"),
            ("tool", "call_b"),
            ("tool", "call_c"),
        ]
        assert results[0]["content"] == "sunny in Paris"
        assert results[1]["content"] == "Error: tool 'broken' failed: RuntimeError: backend down"
        assert "city: Input should be a valid string" in results[2]["content"]
        # The id reused in the next turn answers that turn's call.
        assert third["messages"][-1] == {
            "role": "tool",
            "tool_call_id": "call_a",
            "content": "sunny in Rome",
        }


async def test_anthropic_parallel_tool_use_and_tool_result() -> None:
    async with FakeAnthropicServer() as server:
        server.script(
            {
                "text": "Let me check.",
                "tool_use": [
                    {"id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
                    {"id": "toolu_2", "name": "forecast", "input": {"days": 2}},
                ],
            },
            "Oslo is sunny.",
        )
        async with AnthropicChatModel(
            "claude-test", base_url=server.base_url, api_key="sk-ant-test", max_retries=0
        ) as model:
            client = ChatClient(
                model, tools=[weather], advisors=[ToolCallingAdvisor(max_parallel_tools=2)]
            )
            response = await client.prompt("Oslo?").call()
        assert response.content == "Oslo is sunny."
        first, second = (r.json for r in server.requests)
        assert isinstance(first, dict)
        assert isinstance(second, dict)
        assert [t["name"] for t in first["tools"]] == ["weather"]
        assert first["tools"][0]["input_schema"]["properties"]["city"]["type"] == "string"
        assistant, results = second["messages"][-2:]
        assert assistant["role"] == "assistant"
        assert [b["id"] for b in assistant["content"] if b["type"] == "tool_use"] == [
            "toolu_1",
            "toolu_2",
        ]
        assert results["role"] == "user"
        assert [(b["type"], b["tool_use_id"]) for b in results["content"]] == [
            ("tool_result", "toolu_1"),
            ("tool_result", "toolu_2"),
        ]
        assert results["content"][0]["content"] == "sunny in Oslo"
        assert "no tool named 'forecast'" in json.dumps(results["content"][1]["content"])
