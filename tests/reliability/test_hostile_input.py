"""Hostile input: parsers answer with typed errors only, never a crash or a hang.

Fuzzed with hypothesis (seeded by its database-less, derandomized profile so CI repeats): the Jev
response parser, tool-argument validation, tool-call unpacking, the structured-output parser and
the CLI's JSONL reader. Then the inputs a fuzzer rarely builds: JSON nested past the decoder's
recursion limit (it raised `RecursionError`, a crash, in four places before the fix), prompt text
quoting our own format-instruction block, SQL in conversation ids, and bad CLI file paths.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pydantic
import pytest

pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis (a dev dependency)")

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jevrefine as jr
from jevrefine import cli
from jevrefine.cli._io import BadLine, Record, parse_line
from jevrefine.exceptions import StructuredOutputError
from jevrefine.jev import JudgeResponseError
from jevrefine.jev.responses import UnknownAnswerWarning, parse_system_one
from jevrefine.memory import InMemoryChatMemory, SqliteChatMemory
from jevrefine.messages import AssistantMessage, Message, ToolCall, UserMessage
from jevrefine.structured import output_spec, strip_format_instructions
from jevrefine.tools import ToolArgumentsError

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same examples on every run: deterministic CI
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

DEEP = "[" * 100_000 + "]" * 100_000
"""Nested past every JSON decoder's recursion limit."""

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=25,
)

answer_types = st.sampled_from(["noul", "choice", "score", "box", "zzz", "", None, 3])
near_answers = st.fixed_dictionaries(
    {"type": answer_types},
    optional={
        "noul": json_values,
        "choice": json_values,
        "score": json_values,
        "confidence": json_values,
        "probabilities": json_values,
        "legend": json_values,
        "box": json_values,
    },
)
near_responses = st.fixed_dictionaries(
    {"model": st.sampled_from(["jev-1.13.0", 7, None])},
    optional={
        "answers": st.dictionaries(st.text(max_size=8), near_answers, max_size=3) | json_values,
        "usage": json_values,
    },
)


@FUZZ
@given(st.one_of(json_values, near_responses))
def test_jev_response_parser_raises_only_its_typed_error(data: Any) -> None:
    """Promise: any decoded body is a `SystemOneResponse` or a `JudgeResponseError`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownAnswerWarning)
        with contextlib.suppress(JudgeResponseError):
            parse_system_one(data)


class Weather(pydantic.BaseModel):
    city: str
    days: int


@jr.tool
def forecast(city: str, days: int = 1) -> str:
    """The forecast.

    Args:
        city: where.
        days: how many days.
    """
    return f"{city}: sunny x{days}"


text_like_json = st.one_of(
    st.text(max_size=200),
    json_values.map(json.dumps),
    st.builds(lambda a, b: f"Sure! ```json\n{a}\n``` {b}", json_values.map(json.dumps), st.text()),
)


@FUZZ
@given(text_like_json)
def test_tool_arguments_raise_only_their_typed_error(arguments: str) -> None:
    """Promise: the model's tool arguments validate, or `ToolArgumentsError` says why."""
    with contextlib.suppress(ToolArgumentsError):
        forecast.validate_arguments(arguments)
    ToolCall("id", "forecast", arguments).parsed_arguments()  # never raises


@FUZZ
@given(text_like_json)
def test_structured_output_raises_only_its_typed_error(text: str) -> None:
    """Promise: a model's answer parses as the type, or `StructuredOutputError` says why."""
    for target in (Weather, list[int], str):
        with contextlib.suppress(StructuredOutputError):
            output_spec(target).parse(text)


@FUZZ
@given(st.text(max_size=200) | json_values.map(json.dumps))
def test_cli_jsonl_reader_never_raises(line: str) -> None:
    """Promise: every input line is a record or a reported bad line; the run goes on."""
    result = parse_line(1, line, required=("prompt",), id_field="id")
    assert isinstance(result, Record | BadLine)


def test_json_nested_past_the_recursion_limit_is_a_typed_error() -> None:
    """Promise: deep nesting is bad input, not a crash (each raised RecursionError before)."""
    with pytest.raises(ToolArgumentsError):
        forecast.validate_arguments(DEEP)
    assert ToolCall("id", "forecast", DEEP).parsed_arguments() == DEEP
    with pytest.raises(StructuredOutputError):
        output_spec(list[int]).parse(DEEP)
    bad = parse_line(1, DEEP, required=("prompt",), id_field="id")
    assert isinstance(bad, BadLine)
    assert "nested too deeply" in bad.reason
    spec = output_spec(Weather)
    hostile = spec.instructions() + DEEP  # our marker, then a body the decoder cannot take
    assert strip_format_instructions(hostile) == hostile


@FUZZ
@given(st.text(max_size=300))
def test_format_instruction_stripping_keeps_the_users_text(text: str) -> None:
    """Promise: only our exact trailing block is stripped, whatever the user's text contains,
    even when it quotes our marker or a whole instruction block itself.
    """
    spec = output_spec(Weather)
    block = spec.instructions()
    assert strip_format_instructions(text + block) == text
    quoted = f"{text} {block} and more"
    assert strip_format_instructions(quoted) == quoted
    assert strip_format_instructions(quoted + block) == quoted


def _texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if isinstance(m, UserMessage | AssistantMessage)]


INJECTIONS = [
    "x'; DROP TABLE messages; --",
    "' OR '1'='1",
    'a" OR 1=1 --',
    "%",
    "_",
    "c1\x00c2",
    "🙂 conversation",
    "NULL",
    "x" * 5000,
]


@pytest.mark.parametrize("memory_kind", ["sqlite", "memory"])
async def test_conversation_ids_are_data_not_sql(tmp_path: Path, memory_kind: str) -> None:
    """Promise: any conversation id is stored and found as itself; none reaches another's turns."""
    memory = (
        SqliteChatMemory(tmp_path / "memory.db")
        if memory_kind == "sqlite"
        else InMemoryChatMemory()
    )
    await memory.add("victim", [UserMessage("secret question"), AssistantMessage("secret")])
    for index, conversation in enumerate(INJECTIONS):
        await memory.add(conversation, [UserMessage(f"q{index}"), AssistantMessage(f"a{index}")])
        assert _texts(await memory.get(conversation)) == [f"q{index}", f"a{index}"]
    assert _texts(await memory.get("victim")) == ["secret question", "secret"]
    if isinstance(memory, SqliteChatMemory):
        assert set(await memory.conversation_ids()) == {"victim", *INJECTIONS}
    await memory.clear(INJECTIONS[0])
    assert await memory.get(INJECTIONS[0]) == []
    assert len(await memory.get("victim")) == 2


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "missing.jsonl"),
        ("directory", "a_directory"),
        ("same", "the same file as the input"),
    ],
)
def test_cli_bad_paths_exit_2_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str
) -> None:
    """Promise: a missing input, a directory, or output equal to input: exit 2, a clear message,
    and the input file untouched.
    """
    source = tmp_path / "in.jsonl"
    source.write_text('"hello"\n', encoding="utf-8")
    if case == "missing":
        argv = ["run", str(tmp_path / "missing.jsonl"), "--judge", "none"]
    elif case == "directory":
        (tmp_path / "a_directory").mkdir()
        argv = ["run", str(tmp_path / "a_directory"), "--judge", "none"]
    else:
        argv = ["run", str(source), "-o", str(source), "--judge", "none"]
    code = cli.main([*argv, "--provider", "openai", "--base-url", "http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert source.read_text(encoding="utf-8") == '"hello"\n'


def test_cli_unreadable_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Promise: an input we may not read is a clear error, not a traceback."""
    import os

    source = tmp_path / "locked.jsonl"
    source.write_text('"hello"\n', encoding="utf-8")
    source.chmod(0)
    try:
        if os.access(source, os.R_OK):  # root reads anything: nothing to prove here
            pytest.skip("running as root: the file stays readable")
        code = cli.main(["run", str(source), "--judge", "none", "--provider", "openai",
                         "--base-url", "http://127.0.0.1:9/v1"])  # fmt: skip
    finally:
        source.chmod(0o600)
    assert code == 2
    assert "locked.jsonl" in capsys.readouterr().err
