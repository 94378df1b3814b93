"""ChatClient and the prompt spec: building prompts, defaults and overrides, streaming, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import ClassVar

import pytest

import jevrefine as jr
from jevrefine import (
    AssistantMessage,
    ChatClient,
    ChatOptions,
    ChatResponse,
    Prompt,
    StreamingNotSupportedError,
    SystemMessage,
    UserError,
    UserMessage,
)
from jevrefine.exceptions import EmptyResponseError
from jevrefine.testing import FunctionModel


def last_text(prompt: Prompt) -> str:
    return prompt.messages[-1].text  # type: ignore[union-attr]


async def test_prompt_text_equals_user_and_system_default_applies() -> None:
    model = FunctionModel(last_text)
    client = ChatClient(model, system="be brief")
    assert await client.prompt("hi").content() == "hi"
    assert await client.prompt().user("hi").content() == "hi"
    assert model.prompts[0] == model.prompts[1]
    assert model.prompts[0].messages == (SystemMessage("be brief"), UserMessage("hi"))


async def test_spec_overrides_client_defaults() -> None:
    model = FunctionModel(last_text)
    client = ChatClient(model, system="default", options=ChatOptions(temperature=0.7, max_tokens=9))
    await client.prompt("q").system("override").options(temperature=0.0).call()
    prompt = model.prompts[0]
    assert prompt.messages[0] == SystemMessage("override")
    assert prompt.options.temperature == 0.0
    assert prompt.options.max_tokens == 9


async def test_spec_is_immutable_and_reusable() -> None:
    model = FunctionModel(last_text)
    base = ChatClient(model).prompt().system("s")
    first = base.user("one")
    second = base.user("two")
    assert await first.content() == "one"
    assert await second.content() == "two"
    assert await first.content() == "one"


async def test_history_goes_before_the_user_message() -> None:
    model = FunctionModel(last_text)
    history = [UserMessage("earlier"), AssistantMessage("reply")]
    await ChatClient(model).prompt("now").messages(history).call()
    assert [m.role for m in model.prompts[0].messages] == ["user", "assistant", "user"]


async def test_options_accepts_a_chat_options_value() -> None:
    model = FunctionModel(last_text)
    await ChatClient(model).prompt("x").options(ChatOptions(seed=3)).call()
    assert model.prompts[0].options.seed == 3


def test_unknown_option_is_a_typed_error_naming_it() -> None:
    client = ChatClient(FunctionModel(last_text))
    with pytest.raises(UserError, match="'temprature'"):
        client.prompt("x").options(temprature=0)


async def test_prompt_without_user_message_is_rejected() -> None:
    client = ChatClient(FunctionModel(last_text), system="only a system message")
    with pytest.raises(UserError, match="no user message"):
        await client.prompt().call()


def test_constructor_checks_its_arguments() -> None:
    with pytest.raises(UserError, match="ChatModel"):
        ChatClient("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="ChatOptions"):
        ChatClient(FunctionModel(last_text), options={"temperature": 0})  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not a tool"):
        ChatClient(FunctionModel(last_text), tools=[print])  # type: ignore[list-item]


async def test_model_returning_nothing_is_a_typed_error() -> None:
    model = FunctionModel(lambda prompt: ChatResponse(()))
    with pytest.raises(EmptyResponseError, match="no generations"):
        await ChatClient(model).prompt("x").call()


async def test_function_returning_the_wrong_type_is_a_typed_error() -> None:
    model = FunctionModel(lambda prompt: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(UserError, match="return a str"):
        await ChatClient(model).prompt("x").call()


async def test_model_exceptions_pass_through_unchanged() -> None:
    class Boom(Exception):
        pass

    def fail(prompt: Prompt) -> str:
        raise Boom("no")

    with pytest.raises(Boom):
        await ChatClient(FunctionModel(fail)).prompt("x").call()


async def test_stream_yields_text_chunks() -> None:
    client = ChatClient(FunctionModel(lambda p: "a fairly long answer to stream"))
    chunks = [c async for c in client.prompt("x").stream()]
    assert len(chunks) > 1
    assert "".join(chunks) == "a fairly long answer to stream"


async def test_stream_with_a_stream_function() -> None:
    async def pieces(prompt: Prompt) -> AsyncIterator[str]:
        for piece in ("one ", "two ", "three"):
            yield piece

    model = FunctionModel(last_text, stream_function=pieces)
    responses = [r async for r in ChatClient(model).prompt("x").stream_responses()]
    assert "".join(r.content for r in responses) == "one two three"
    assert responses[-1].chat_response.metadata.usage.output_tokens == 3


async def test_stream_through_a_streaming_advisor() -> None:
    class Upper(jr.BaseAdvisor):
        name = "upper"

        def after(self, response: jr.ChatClientResponse) -> jr.ChatClientResponse:
            return response.copy(chat_response=ChatResponse.of_text(response.content.upper()))

    client = ChatClient(FunctionModel(lambda p: "quiet words here"), advisors=[Upper()])
    assert "".join([c async for c in client.prompt("x").stream()]) == "QUIET WORDS HERE"


async def test_stream_refuses_an_advisor_that_cannot_stream_naming_it() -> None:
    class CallOnly:
        name = "needs-whole-answer"
        order = 0

        async def advise_call(self, request, chain):  # type: ignore[no-untyped-def]
            return await chain.next_call(request)

    model = FunctionModel(last_text)
    stream = ChatClient(model, advisors=[CallOnly()]).prompt("x").stream()
    with pytest.raises(StreamingNotSupportedError, match="needs-whole-answer"):
        async for _ in stream:
            pass
    assert model.prompts == []  # refused before the model was asked


async def test_stream_advisor_raising_not_implemented_is_named() -> None:
    class Refuses:
        name = "refuses"
        order = 0

        async def advise_call(self, request, chain):  # type: ignore[no-untyped-def]
            return await chain.next_call(request)

        def advise_stream(self, request, chain):  # type: ignore[no-untyped-def]
            raise NotImplementedError("a verdict needs the whole answer")

    with pytest.raises(StreamingNotSupportedError, match="refuses"):
        async for _ in (
            ChatClient(FunctionModel(last_text), advisors=[Refuses()]).prompt("x").stream()
        ):
            pass


async def test_model_that_cannot_stream_is_named() -> None:
    class CallOnlyModel(jr.ChatModel):
        @property
        def model_name(self) -> str:
            return "call-only"

        async def call(self, prompt: Prompt) -> ChatResponse:
            return ChatResponse.of_text("x")

    with pytest.raises(StreamingNotSupportedError, match="CallOnlyModel"):
        async for _ in ChatClient(CallOnlyModel()).prompt("x").stream():
            pass


async def test_tools_are_sent_as_definitions() -> None:
    class Weather:
        name = "weather"
        description = "Get the weather"
        parameters_schema: ClassVar[dict[str, object]] = {
            "type": "object",
            "properties": {"city": {"type": "string"}},
        }
        return_direct = False

        async def call(self, arguments: str) -> str:
            return "sunny"

    model = FunctionModel(last_text)
    await ChatClient(model, tools=[Weather()]).prompt("x").call()
    tools = model.prompts[0].options.tools
    assert tools is not None
    assert [t.name for t in tools] == ["weather"]
    assert tools[0].parameters["properties"] == {"city": {"type": "string"}}


async def test_client_does_not_close_the_model() -> None:
    closed: list[bool] = []

    class Closing(FunctionModel):
        async def aclose(self) -> None:
            closed.append(True)

    model = Closing(last_text)
    await ChatClient(model).prompt("x").call()
    assert closed == []
    async with model:
        pass
    assert closed == [True]


class _NoTools(FunctionModel):
    supports_tools = False


class _Weather:
    name = "weather"
    description = "Get the weather"
    parameters_schema: ClassVar[dict[str, object]] = {"type": "object", "properties": {}}
    return_direct = False

    async def call(self, arguments: str) -> str:
        return "sunny"


async def test_tools_are_dropped_for_a_model_without_tool_support() -> None:
    # Seed 004: tools given to the ChatClient (defaults or per prompt) are dropped, no loop runs.
    model = _NoTools(last_text)
    client = ChatClient(model, tools=[_Weather()])
    assert await client.prompt("x").tools(_Weather()).content() == "x"
    assert model.prompts[0].options.tools is None


async def test_a_client_copy_keeps_its_settings_and_telemetry_and_changes_what_it_is_given() -> (
    None
):
    first, second = FunctionModel(lambda p: "one"), FunctionModel(lambda p: f"two: {p.system_text}")
    shout = _Shout()
    client = jr.ChatClient(first, system="Be brief.", options=jr.ChatOptions(temperature=0.1))
    copy = client.copy(model=second, advisors=[shout])
    assert copy.telemetry is client.telemetry
    assert (copy.model, copy.advisors) == (second, (shout,))
    assert (client.model, client.advisors) == (first, ())  # the original is as it was
    assert await copy.prompt("hi").content() == "TWO: BE BRIEF."
    assert second.prompts[-1].options.temperature == 0.1
    assert await client.prompt("hi").content() == "one"
    with pytest.raises(jr.UserError, match="is not a ChatModel"):
        client.copy(model="gpt")  # type: ignore[arg-type]


async def test_a_prompt_copy_is_sent_through_the_client_and_advisors_it_is_given() -> None:
    quiet = jr.ChatClient(FunctionModel(lambda p: "quiet"))
    loud = jr.ChatClient(FunctionModel(lambda p: "loud"))
    shout = _Shout()
    spec = quiet.prompt("hi").advisors(shout)
    assert (spec.client, spec.prompt_advisors) == (quiet, (shout,))
    assert await spec.copy(client=loud).content() == "LOUD"
    assert await spec.copy(advisors=[]).content() == "quiet"
    with pytest.raises(jr.UserError, match="is not a ChatClient"):
        spec.copy(client=object())  # type: ignore[arg-type]


class _Shout:
    name = "shout"
    order = 0

    async def advise_call(
        self, request: jr.ChatClientRequest, chain: jr.CallAdvisorChain
    ) -> jr.ChatClientResponse:
        response = await chain.next_call(request)
        return response.copy(chat_response=jr.ChatResponse.of_text(response.content.upper()))
