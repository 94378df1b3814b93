"""entity(): native and prompt-based structured output, tolerant parsing, typed errors."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from jevrefine import ChatClient, Prompt, StructuredOutputError
from jevrefine.structured import (
    FORMAT_INSTRUCTIONS_MARKER,
    format_instructions_schema,
    output_spec,
    strip_format_instructions,
)
from jevrefine.testing import FunctionModel


class Triage(pydantic.BaseModel):
    team: str
    urgent: float


@dataclass
class City:
    name: str
    population: int


class Point(TypedDict):
    x: int
    y: int


def answering(text: str) -> FunctionModel:
    return FunctionModel(lambda prompt: text)


async def test_native_sends_the_schema_as_response_format() -> None:
    model = answering('{"team": "infra", "urgent": 0.9}')
    result = await ChatClient(model).prompt("ticket").entity(Triage, native=True)
    assert result == Triage(team="infra", urgent=0.9)
    fmt = model.prompts[0].options.response_format
    assert fmt is not None
    assert fmt.type == "json_schema"
    assert fmt.name == "Triage"
    assert set(fmt.schema["properties"]) == {"team", "urgent"}  # type: ignore[index]
    assert FORMAT_INSTRUCTIONS_MARKER not in model.prompts[0].messages[-1].text  # type: ignore[union-attr]


async def test_prompt_based_appends_strippable_instructions() -> None:
    model = answering('{"name": "Paris", "population": 2100000}')
    result = await ChatClient(model).prompt("biggest city?").entity(City, native=False)
    assert result == City("Paris", 2100000)
    sent = model.prompts[0].messages[-1].text  # type: ignore[union-attr]
    assert sent.startswith("biggest city?" + FORMAT_INSTRUCTIONS_MARKER)
    assert '"population"' in sent
    assert strip_format_instructions(sent) == "biggest city?"
    assert model.prompts[0].options.response_format is None


async def test_native_none_follows_the_model_declaration() -> None:
    class NoNative(FunctionModel):
        supports_native_structured_output = False

    native = answering('{"x": 1, "y": 2}')
    await ChatClient(native).prompt("p").entity(Point)
    assert native.prompts[0].options.response_format is not None

    prompt_based = NoNative(lambda p: '{"x": 1, "y": 2}')
    assert await ChatClient(prompt_based).prompt("p").entity(Point) == {"x": 1, "y": 2}
    assert prompt_based.prompts[0].options.response_format is None


@pytest.mark.parametrize(
    "reply",
    [
        '```json\n{"team": "billing", "urgent": 0.1}\n```',
        '```\n{"team": "billing", "urgent": 0.1}\n```',
        'Sure! Here it is:\n{"team": "billing", "urgent": 0.1}\nHope that helps.',
        '  {"team": "billing", "urgent": 0.1}  \n',
    ],
)
async def test_code_fences_and_prose_are_tolerated(reply: str) -> None:
    assert await ChatClient(answering(reply)).prompt("t").entity(Triage) == Triage(
        team="billing", urgent=0.1
    )


async def test_list_targets_are_wrapped_in_an_object_schema() -> None:
    model = answering('{"result": [{"name": "Oslo", "population": 700000}]}')
    cities = await ChatClient(model).prompt("t").entity(list[City], native=True)
    assert cities == [City("Oslo", 700000)]
    schema = model.prompts[0].options.response_format.schema  # type: ignore[union-attr]
    assert schema["type"] == "object"
    assert schema["properties"]["result"]["type"] == "array"
    assert "$defs" in schema


async def test_a_bare_list_answer_is_accepted_for_a_list_target() -> None:
    model = answering('[{"name": "Oslo", "population": 700000}]')
    assert await ChatClient(model).prompt("t").entity(list[City]) == [City("Oslo", 700000)]


async def test_dict_target() -> None:
    assert await ChatClient(answering('{"a": 1}')).prompt("t").entity(dict) == {"a": 1}


async def test_non_json_reply_raises_with_the_raw_text() -> None:
    with pytest.raises(StructuredOutputError) as info:
        await ChatClient(answering("I think the team is infra.")).prompt("t").entity(Triage)
    assert info.value.raw_text == "I think the team is infra."
    assert info.value.target == "Triage"
    assert "not JSON" in str(info.value)
    assert "native=True" in str(info.value)


async def test_invalid_json_shape_names_the_field() -> None:
    reply = json.dumps({"team": "infra", "urgent": "very"})
    with pytest.raises(StructuredOutputError) as info:
        await ChatClient(answering(reply)).prompt("t").entity(Triage)
    assert "urgent" in str(info.value)
    assert info.value.raw_text == reply


def test_unsupported_target_is_a_user_error() -> None:
    with pytest.raises(ValueError, match="JSON schema"):
        output_spec(object())


def test_instructions_go_to_the_last_user_message_only() -> None:
    from jevrefine import AssistantMessage, UserMessage

    spec = output_spec(Triage)
    prompt = Prompt([UserMessage("first"), AssistantMessage("ok"), UserMessage("second")])
    texts = [m.text for m in spec.with_instructions(prompt).messages]  # type: ignore[union-attr]
    assert texts[0] == "first"
    assert texts[2].startswith("second" + FORMAT_INSTRUCTIONS_MARKER)


def test_only_the_exact_trailing_instruction_block_is_stripped() -> None:
    spec = output_spec(list[int])
    sent = "numbers?" + spec.instructions()
    assert strip_format_instructions(sent) == "numbers?"
    assert format_instructions_schema(sent) == spec.schema
    quoting = f"What does {FORMAT_INSTRUCTIONS_MARKER} mean in my prompt?"
    assert strip_format_instructions(quoting) == quoting
    assert format_instructions_schema(quoting) is None
    edited = sent + "\nand please be brief"  # no longer ends with the schema
    assert strip_format_instructions(edited) == edited
