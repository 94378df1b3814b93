"""The advisor chain: order, ties, recursion, context sharing, copy()."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

import jevrefine as jr
from jevrefine import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    CallAdvisorChain,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    UserError,
    UserMessage,
)
from jevrefine.testing import FunctionModel


@dataclass
class Recorder:
    """Logs `before:<name>` / `after:<name>` into a shared list."""

    name: str
    order: int
    log: list[str]

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        self.log.append(f"before:{self.name}")
        response = await chain.next_call(request)
        self.log.append(f"after:{self.name}")
        return response


@dataclass
class Repeat:
    """A recursive advisor: calls the rest of the chain `rounds` times through chain.copy(self)."""

    rounds: int
    name: str = "repeat"
    order: int = 0
    log: list[str] = field(default_factory=list)

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        rest = chain.copy(self)
        response = None
        for attempt in range(self.rounds):
            self.log.append(f"round {attempt}")
            response = await rest.next_call(request)
        assert response is not None
        return response


def echo_model(log: list[str] | None = None) -> FunctionModel:
    def answer(prompt: jr.Prompt) -> str:
        if log is not None:
            log.append("model")
        last = prompt.last_user_message()
        return f"echo: {last.text if last else ''}"

    return FunctionModel(answer)


async def test_advisors_run_in_ascending_order_around_the_model() -> None:
    log: list[str] = []
    advisors = [
        Recorder("late", LOWEST_PRECEDENCE, log),
        Recorder("early", HIGHEST_PRECEDENCE, log),
        Recorder("middle", 0, log),
    ]
    client = ChatClient(echo_model(log), advisors=advisors)
    assert await client.prompt("hi").content() == "echo: hi"
    assert log == [
        "before:early",
        "before:middle",
        "before:late",
        "model",
        "after:late",
        "after:middle",
        "after:early",
    ]


async def test_ties_keep_registration_order_client_then_prompt() -> None:
    log: list[str] = []
    client = ChatClient(echo_model(), advisors=[Recorder("a", 5, log), Recorder("b", 5, log)])
    await client.prompt("x").advisors(Recorder("c", 5, log), Recorder("d", 1, log)).call()
    assert [e for e in log if e.startswith("before")] == [
        "before:d",
        "before:a",
        "before:b",
        "before:c",
    ]


async def test_recursive_advisor_reruns_only_the_advisors_after_it() -> None:
    log: list[str] = []
    repeat = Repeat(3, order=0, log=log)
    client = ChatClient(
        echo_model(log),
        advisors=[Recorder("outer", -10, log), repeat, Recorder("inner", 10, log)],
    )
    await client.prompt("x").call()
    assert log.count("before:outer") == 1
    assert log.count("before:inner") == 3
    assert log.count("model") == 3
    assert log[0] == "before:outer"
    assert log[-1] == "after:outer"


async def test_chain_is_reenterable_without_copy() -> None:
    calls: list[str] = []

    class Twice:
        name = "twice"
        order = 0

        async def advise_call(
            self, request: ChatClientRequest, chain: CallAdvisorChain
        ) -> ChatClientResponse:
            await chain.next_call(request)
            return await chain.next_call(request)

    await ChatClient(echo_model(calls), advisors=[Twice()]).prompt("x").call()
    assert calls == ["model", "model"]


async def test_context_is_shared_by_advisors_and_returned_on_the_response() -> None:
    class Writer:
        name = "writer"
        order = 0

        async def advise_call(
            self, request: ChatClientRequest, chain: CallAdvisorChain
        ) -> ChatClientResponse:
            request.context["seen_by_writer"] = request.context.get("conversation_id")
            return await chain.next_call(request)

    class Reader:
        name = "reader"
        order = 1
        seen: object = None

        async def advise_call(
            self, request: ChatClientRequest, chain: CallAdvisorChain
        ) -> ChatClientResponse:
            Reader.seen = request.context.get("seen_by_writer")
            return await chain.next_call(request)

    response = await (
        ChatClient(echo_model(), advisors=[Reader(), Writer()])
        .prompt("x")
        .advisors(conversation_id="c-42")
        .call()
    )
    assert Reader.seen == "c-42"
    assert response.context["seen_by_writer"] == "c-42"


async def test_request_copy_shallow_copies_context_unless_given() -> None:
    request = ChatClientRequest(jr.Prompt([UserMessage("x")]), context={"a": [1]})
    copied = request.copy()
    copied.context["b"] = 2
    assert "b" not in request.context
    assert copied.context["a"] is request.context["a"]
    shared = request.copy(context=request.context)
    assert shared.context is request.context


async def test_advisor_can_change_the_prompt_for_the_model() -> None:
    class Shout(jr.BaseAdvisor):
        name = "shout"

        def before(self, request: ChatClientRequest) -> ChatClientRequest:
            prompt = request.prompt.with_messages([UserMessage("LOUD")])
            return request.copy(prompt=prompt)

    model = echo_model()
    assert await ChatClient(model, advisors=[Shout()]).prompt("quiet").content() == "echo: LOUD"


async def test_copy_of_an_advisor_not_in_the_chain_is_an_error() -> None:
    class Probe:
        name = "probe"
        order = 0

        async def advise_call(
            self, request: ChatClientRequest, chain: CallAdvisorChain
        ) -> ChatClientResponse:
            chain.copy(Repeat(1))
            raise AssertionError("unreachable")

    with pytest.raises(UserError, match="not in this chain"):
        await ChatClient(echo_model(), advisors=[Probe()]).prompt("x").call()


def test_objects_that_are_not_advisors_are_rejected_with_what_is_missing() -> None:
    with pytest.raises(UserError, match="advise_call"):
        ChatClient(echo_model(), advisors=[object()])  # type: ignore[list-item]

    class BadOrder:
        name = "bad"
        order = "first"

        async def advise_call(self, request, chain):  # type: ignore[no-untyped-def]
            return await chain.next_call(request)

    with pytest.raises(UserError, match="order"):
        ChatClient(echo_model(), advisors=[BadOrder()])  # type: ignore[list-item]


def test_plain_class_satisfies_the_protocol() -> None:
    assert isinstance(Recorder("a", 0, []), jr.CallAdvisor)
    assert jr.HIGHEST_PRECEDENCE == -(2**31)
    assert jr.LOWEST_PRECEDENCE == 2**31 - 1
