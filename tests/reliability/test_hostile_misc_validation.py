"""Bad constructor and function arguments are `UserError`s naming the parameter, the value and a fix.

Issue 16 item 8 (the parts outside the models and the Jev client): `ChatOptions(temperature='0.2')`
raised a bare `TypeError`, `tool_choice='always'` was accepted, `refine_many(client, "abc")` made
three refinements, one per character. One table: each row a call and the parameter it gets wrong.
"""

# ruff: noqa: E501 - the table reads best one case a line
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jevrefine as jr
from jevrefine import (
    ChatClient,
    ChatOptions,
    GuardrailAdvisor,
    SelfRefineAdvisor,
    ToolCallingAdvisor,
)
from jevrefine._validate import shown
from jevrefine.advisors.memory import MessageChatMemoryAdvisor
from jevrefine.advisors.retrieval import RetrievalAdvisor
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, noul
from jevrefine.local import LocalModelServer
from jevrefine.memory import InMemoryChatMemory, SqliteChatMemory
from jevrefine.retrieval import SqliteFtsRetriever
from jevrefine.testing import FunctionModel
from jevrefine.tools import tool

MODEL = FunctionModel(lambda prompt: jr.AssistantMessage("ok"))
JEV = JudgeClient("sk-validation-0123456789", base_url="http://127.0.0.1:9")
JUDGE = Judge(JEV, [noul("ok", Noul("Is `assistant_answer` ok?"))])
MEMORY = InMemoryChatMemory()


class _Retriever:
    async def retrieve(self, query: str, *, top_k: int | None = None) -> list[jr.Document]:
        return []


def tool_with(**options: Any) -> Any:
    def ping() -> str:
        """Ping."""
        return "pong"

    return tool(**options)(ping)


Case = tuple[Callable[..., Any], dict[str, Any], str]
"""A call, the keyword arguments (one of them wrong), the parameter named in the error."""

CASES: dict[str, Case] = {
    # ChatOptions: every field, through the shared validators.
    "options temperature str": (ChatOptions, {"temperature": "0.2"}, "temperature"),
    "options temperature nan": (ChatOptions, {"temperature": math.nan}, "temperature"),
    "options temperature high": (ChatOptions, {"temperature": 2.5}, "temperature"),
    "options top_p": (ChatOptions, {"top_p": 1.5}, "top_p"),
    "options max_tokens str": (ChatOptions, {"max_tokens": "256"}, "max_tokens"),
    "options max_tokens 0": (ChatOptions, {"max_tokens": 0}, "max_tokens"),
    "options seed float": (ChatOptions, {"seed": 1.5}, "seed"),
    "options stop int": (ChatOptions, {"stop": 5}, "stop"),
    "options stop list of ints": (ChatOptions, {"stop": [1]}, "stop"),
    "options logprobs str": (ChatOptions, {"logprobs": "yes"}, "logprobs"),
    "options top_logprobs": (ChatOptions, {"top_logprobs": 21}, "top_logprobs"),
    "options tool_choice": (ChatOptions, {"tool_choice": "always"}, "tool_choice"),
    "options extra_body": (ChatOptions, {"extra_body": [1, 2]}, "extra_body"),
    "options response_format": (ChatOptions, {"response_format": {}}, "response_format"),
    "options model blank": (ChatOptions, {"model": " "}, "model"),
    "options tools": (ChatOptions, {"tools": ["weather"]}, "tools"),
    "options.of": (ChatOptions.of, {"temperature": "hot"}, "temperature"),
    # ChatClient.
    "client system": (ChatClient, {"model": MODEL, "system": 5}, "system"),
    "client options": (ChatClient, {"model": MODEL, "options": {"temperature": 0}}, "options"),
    "client advisors one": (ChatClient, {"model": MODEL, "advisors": ToolCallingAdvisor()}, "advisors"),
    "client tools str": (ChatClient, {"model": MODEL, "tools": "weather"}, "tools"),
    "client trace_advisors": (ChatClient, {"model": MODEL, "trace_advisors": "yes"}, "trace_advisors"),
    "client capture_content": (ChatClient, {"model": MODEL, "capture_content": "on"}, "capture_content"),
    "client legacy_attributes": (ChatClient, {"model": MODEL, "legacy_attributes": 1}, "legacy_attributes"),
    # SelfRefineAdvisor.
    "refine attempts str": (SelfRefineAdvisor, {"judge": JUDGE, "max_repeat_attempts": "2"}, "max_repeat_attempts"),
    "refine attempts 0": (SelfRefineAdvisor, {"judge": JUDGE, "max_repeat_attempts": 0}, "max_repeat_attempts"),
    "refine fail_on_exhausted": (SelfRefineAdvisor, {"judge": JUDGE, "fail_on_exhausted_attempts": "no"}, "fail_on_exhausted_attempts"),
    "refine order": (SelfRefineAdvisor, {"judge": JUDGE, "order": 1.5}, "order"),
    "refine token_budget": (SelfRefineAdvisor, {"judge": JUDGE, "token_budget": 0}, "token_budget"),
    "refine feedback_template": (SelfRefineAdvisor, {"judge": JUDGE, "feedback_template": "Try again."}, "feedback_template"),
    "refine skip_evaluation": (SelfRefineAdvisor, {"judge": JUDGE, "skip_evaluation": True}, "skip_evaluation"),
    "refine judge_error_policy": (SelfRefineAdvisor, {"judge": JUDGE, "judge_error_policy": "fail_open"}, "judge_error_policy"),
    # GuardrailAdvisor.
    "guard action str": (GuardrailAdvisor, {"client": JEV, "action_threshold": "0.7"}, "action_threshold"),
    "guard review nan": (GuardrailAdvisor, {"client": JEV, "review_threshold": math.nan}, "review_threshold"),
    "guard severity": (GuardrailAdvisor, {"client": JEV, "severity_block_threshold": -1}, "severity_block_threshold"),
    "guard block_on_review": (GuardrailAdvisor, {"client": JEV, "block_on_review": "yes"}, "block_on_review"),
    "guard refusal": (GuardrailAdvisor, {"client": JEV, "refusal": ""}, "refusal"),
    "guard order": (GuardrailAdvisor, {"client": JEV, "order": "1"}, "order"),
    # ToolCallingAdvisor.
    "tools max_rounds": (ToolCallingAdvisor, {"max_rounds": "3"}, "max_rounds"),
    "tools max_parallel": (ToolCallingAdvisor, {"max_parallel_tools": 0}, "max_parallel_tools"),
    "tools max_tool_calls": (ToolCallingAdvisor, {"max_tool_calls": True}, "max_tool_calls"),
    "tools timeout nan": (ToolCallingAdvisor, {"tool_timeout": math.nan}, "tool_timeout"),
    "tools timeout negative": (ToolCallingAdvisor, {"tool_timeout": -1}, "tool_timeout"),
    "tools order": (ToolCallingAdvisor, {"order": None}, "order"),
    # @tool.
    "tool timeout str": (tool_with, {"timeout": "5"}, "timeout"),
    "tool timeout 0": (tool_with, {"timeout": 0}, "timeout"),
    "tool name int": (tool_with, {"name": 5}, "name"),
    "tool return_direct": (tool_with, {"return_direct": "yes"}, "return_direct"),
    # Memory.
    "memory advisor id": (MessageChatMemoryAdvisor, {"memory": MEMORY, "conversation_id": 5}, "conversation_id"),
    "memory advisor order": (MessageChatMemoryAdvisor, {"memory": MEMORY, "order": "x"}, "order"),
    "memory window": (InMemoryChatMemory, {"max_messages": 0}, "max_messages"),
    "memory window str": (InMemoryChatMemory, {"max_messages": "10"}, "max_messages"),
    # Retrieval.
    "retrieval top_k": (RetrievalAdvisor, {"retriever": _Retriever(), "top_k": 0}, "top_k"),
    "retrieval template": (RetrievalAdvisor, {"retriever": _Retriever(), "template": "{query}"}, "template"),
    "retrieval post_processors": (RetrievalAdvisor, {"retriever": _Retriever(), "post_processors": "abc"}, "post_processors"),
    "retrieval order": (RetrievalAdvisor, {"retriever": _Retriever(), "order": None}, "order"),
    # The local model server.
    "local ctx str": (LocalModelServer, {"ctx": "4096"}, "ctx"),
    "local ctx small": (LocalModelServer, {"ctx": 100}, "ctx"),
    "local threads": (LocalModelServer, {"threads": 0}, "threads"),
    "local parallel bool": (LocalModelServer, {"parallel": True}, "parallel"),
    "local alias": (LocalModelServer, {"alias": ""}, "alias"),
    "local model": (LocalModelServer, {"model": 5}, "model"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_bad_argument_names_the_parameter_the_value_and_a_fix(case: str) -> None:
    call, kwargs, parameter = CASES[case]
    with pytest.raises(jr.UserError) as caught:
        call(**kwargs)
    message = str(caught.value)
    assert f"{parameter}=" in message, message
    assert shown(kwargs[parameter])[:20] in message, message
    assert "pass" in message, message


BATCH: dict[str, tuple[dict[str, Any], str]] = {
    "a str is one input": ({"inputs": "abc"}, "inputs"),
    "bytes": ({"inputs": b"abc"}, "inputs"),
    "one spec": ({"inputs": ChatClient(MODEL).prompt("hi")}, "inputs"),
    "not iterable": ({"inputs": 5}, "inputs"),
    "concurrency 0": ({"inputs": ["a"], "concurrency": 0}, "concurrency"),
    "concurrency str": ({"inputs": ["a"], "concurrency": "4"}, "concurrency"),
    "fail_fast": ({"inputs": ["a"], "fail_fast": "no"}, "fail_fast"),
    "on_result": ({"inputs": ["a"], "on_result": 3}, "on_result"),
}


@pytest.mark.parametrize("case", list(BATCH), ids=list(BATCH))
async def test_batch_arguments_are_checked_before_anything_runs(case: str) -> None:
    kwargs, parameter = BATCH[case]
    asked: list[str] = []

    def answer(prompt: jr.Prompt) -> jr.AssistantMessage:
        asked.append(prompt.messages[-1].text)  # type: ignore[union-attr]
        return jr.AssistantMessage("ok")

    client = ChatClient(FunctionModel(answer))
    with pytest.raises(jr.UserError) as caught:
        await jr.refine_many(client, **kwargs)
    assert f"{parameter}=" in str(caught.value)
    assert "pass" in str(caught.value)
    assert asked == []  # before: "abc" made three refinements, "a", "b" and "c"


def test_sqlite_store_settings(tmp_path: Path) -> None:
    with pytest.raises(jr.UserError, match=r"timeout='5' is not a number: pass"):
        SqliteChatMemory(tmp_path / "m.db", timeout="5")
    with pytest.raises(jr.UserError, match=r"top_k='3' is not a whole number: pass"):
        SqliteFtsRetriever(tmp_path / "r.db", top_k="3")


def test_ray_arguments_are_checked_before_scheduling() -> None:
    pytest.importorskip("ray.data")
    from jevrefine.ray import refine_dataset

    def factory() -> ChatClient:
        return ChatClient(MODEL)

    bad: list[tuple[dict[str, Any], str]] = [
        ({"num_actors": (4, 2)}, "num_actors[1]=2 is out of range"),
        ({"num_actors": "2"}, "num_actors='2' is not a whole number"),
        ({"batch_size": 0}, "batch_size=0 is out of range"),
        ({"num_cpus": "1"}, "num_cpus='1' is not a number"),
        ({"prompt_column": ""}, "prompt_column='' is blank"),
    ]
    for kwargs, fragment in bad:
        with pytest.raises(jr.UserError, match=None) as caught:
            refine_dataset(None, factory, **kwargs)  # type: ignore[arg-type]
        assert fragment in str(caught.value)


def test_valid_values_are_kept_in_their_canonical_type() -> None:
    options = ChatOptions(temperature=1, stop="END", top_p=1)
    assert options.temperature == 1.0
    assert isinstance(options.temperature, float)
    assert options.stop == ("END",)
    assert ChatOptions(tool_choice="required").tool_choice == "required"
    assert ToolCallingAdvisor(tool_timeout=5).tool_timeout == 5.0
