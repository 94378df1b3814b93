from __future__ import annotations

import dataclasses

import pytest

from jevrefine import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    Prompt,
    ResponseFormat,
    SystemMessage,
    TokenLogprob,
    ToolCall,
    ToolDefinition,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserError,
    UserMessage,
)
from jevrefine.exceptions import EmptyResponseError
from jevrefine.messages import (
    CHAT_RESPONSE_ADAPTER,
    MESSAGES_ADAPTER,
    PROMPT_ADAPTER,
    concat_chunks,
)


def full_prompt() -> Prompt:
    return Prompt(
        [
            SystemMessage("be brief"),
            UserMessage("weather in Paris?"),
            AssistantMessage("", [ToolCall("call_1", "weather", '{"city": "Paris"}')]),
            ToolResponseMessage([ToolResponse("call_1", "weather", "sunny, 21C")]),
            AssistantMessage("It is sunny."),
        ],
        ChatOptions(
            model="m",
            temperature=0.2,
            top_p=0.9,
            max_tokens=64,
            stop=["END"],
            seed=7,
            response_format=ResponseFormat(schema={"type": "object"}),
            logprobs=True,
            top_logprobs=3,
            tools=[ToolDefinition("weather", "Get the weather", {"type": "object"})],
            tool_choice="auto",
            extra_body={"grammar": 'root ::= "yes" | "no"'},
        ),
    )


def test_positional_construction_matches_the_pinned_signatures() -> None:
    assert SystemMessage("s").text == "s"
    assert UserMessage("u").role == "user"
    call = ToolCall("id", "name", '{"a": 1}')
    assert (call.id, call.name, call.arguments) == ("id", "name", '{"a": 1}')
    assert ToolResponse("id", "name", "data").data == "data"
    assert AssistantMessage("t").tool_calls == ()


def test_prompt_round_trips_through_json() -> None:
    prompt = full_prompt()
    data = PROMPT_ADAPTER.dump_json(prompt)
    again = PROMPT_ADAPTER.validate_json(data)
    assert again == prompt
    assert isinstance(again.messages[2], AssistantMessage)
    assert isinstance(again.messages[3], ToolResponseMessage)
    assert again.options.stop == ("END",)


def test_messages_round_trip_with_role_discriminator() -> None:
    messages = list(full_prompt().messages)
    dumped = MESSAGES_ADAPTER.dump_python(messages, mode="json")
    assert [m["role"] for m in dumped] == ["system", "user", "assistant", "tool", "assistant"]
    assert MESSAGES_ADAPTER.validate_python(dumped) == messages


def test_chat_response_round_trips_with_logprobs() -> None:
    response = ChatResponse(
        [
            Generation(
                AssistantMessage("yes"),
                {"finish_reason": "stop", "logprobs": [TokenLogprob("yes", -0.1, [("yes", -0.1)])]},
            )
        ],
        ChatResponseMetadata(id="r1", model="m", usage=Usage(3, 1), finish_reasons=["stop"]),
    )
    again = CHAT_RESPONSE_ADAPTER.validate_json(CHAT_RESPONSE_ADAPTER.dump_json(response))
    assert again.metadata == response.metadata
    assert again.result.text == "yes"
    assert again.result.logprobs == (TokenLogprob("yes", -0.1, (("yes", -0.1),)),)


def test_values_are_immutable() -> None:
    message = UserMessage("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.text = "y"  # type: ignore[misc]
    generation = Generation(AssistantMessage("a"), {"finish_reason": "stop"})
    with pytest.raises(TypeError):
        generation.metadata["finish_reason"] = "length"  # type: ignore[index]
    assert isinstance(AssistantMessage("", [ToolCall("1", "t", "{}")]).tool_calls, tuple)


def test_usage_adds_and_totals() -> None:
    total = Usage(3, 4) + Usage(10, 1)
    assert total == Usage(13, 5)
    assert total.total_tokens == 18


def test_unknown_option_names_the_valid_ones() -> None:
    with pytest.raises(UserError) as info:
        ChatOptions.of(temprature=0.1)
    assert "'temprature'" in str(info.value)
    assert "temperature" in str(info.value)
    assert "extra_body" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"temperature": 3.0}, "temperature"),
        ({"top_p": -0.1}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"top_logprobs": 50}, "top_logprobs"),
    ],
)
def test_option_values_are_checked(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        ChatOptions(**kwargs)  # type: ignore[arg-type]


def test_options_merge_field_by_field() -> None:
    base = ChatOptions(model="a", temperature=0.5, max_tokens=10)
    merged = base.merge(ChatOptions(temperature=0.0))
    assert merged == ChatOptions(model="a", temperature=0.0, max_tokens=10)
    assert base.merge(None) is base


def test_json_schema_format_needs_a_schema() -> None:
    with pytest.raises(UserError, match="schema"):
        ResponseFormat(type="json_schema")


def test_empty_response_result_raises_a_typed_error() -> None:
    with pytest.raises(EmptyResponseError, match="no generations"):
        ChatResponse(()).result  # noqa: B018


def test_concat_chunks_joins_text_and_keeps_last_metadata() -> None:
    chunks = [
        ChatResponse([Generation(AssistantMessage("Hel"))], ChatResponseMetadata(id="x")),
        ChatResponse([Generation(AssistantMessage("lo"))]),
        ChatResponse(
            [
                Generation(
                    AssistantMessage("", [ToolCall("1", "t", "{}")]), {"finish_reason": "stop"}
                )
            ],
            ChatResponseMetadata(model="m", usage=Usage(2, 3), finish_reasons=["stop"]),
        ),
    ]
    whole = concat_chunks(chunks)
    assert whole.text == "Hello"
    assert whole.result.output.tool_calls == (ToolCall("1", "t", "{}"),)
    assert whole.metadata.id == "x"
    assert whole.metadata.model == "m"
    assert whole.metadata.usage == Usage(2, 3)
    assert whole.result.finish_reason == "stop"


def test_tool_call_arguments_parse_or_stay_raw() -> None:
    assert ToolCall("1", "t", '{"a": 1}').parsed_arguments() == {"a": 1}
    assert ToolCall("1", "t", "not json").parsed_arguments() == "not json"
    assert ToolCall("1", "t", "").parsed_arguments() == {}
