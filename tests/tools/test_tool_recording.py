"""`record_tool_calls`: the per-request seam's recorder."""

from __future__ import annotations

import anyio
import pytest

from jevrefine.tools import (
    RecordingToolCallback,
    ToolArgumentsError,
    ToolCallRecord,
    record_tool_calls,
    tool,
)


@tool
async def echo(text: str) -> str:
    """Echo."""
    return text.upper()


@tool(return_direct=True)
async def final(text: str) -> str:
    """Final."""
    return text


@tool
async def hang() -> str:
    """Hang."""
    await anyio.sleep(10)
    return "never"


async def test_wrappers_forward_the_tool_and_record_results_and_errors() -> None:
    tools, records = record_tool_calls([echo, final])
    wrapped_echo, wrapped_final = tools
    assert isinstance(wrapped_echo, RecordingToolCallback)
    assert (wrapped_echo.name, wrapped_echo.description) == ("echo", "Echo.")
    assert wrapped_echo.parameters_schema == echo.parameters_schema
    assert (wrapped_echo.return_direct, wrapped_final.return_direct) == (False, True)

    assert await wrapped_echo.call('{"text": "hi"}') == "HI"
    with pytest.raises(ToolArgumentsError):
        await wrapped_echo.call("{oops")
    with pytest.raises(ToolArgumentsError):
        await wrapped_final.call('{"text": 3}')

    assert records[0] == ToolCallRecord("echo", {"text": "hi"}, "HI")
    assert records[1].arguments == "{oops"  # raw string: not valid JSON
    assert records[1].result.startswith("error: the arguments for tool 'echo' are not valid JSON")
    assert records[2].name == "final"
    assert records[2].arguments == {"text": 3}
    assert records[2].failed
    assert not records[0].failed


async def test_separate_recorders_do_not_share_records() -> None:
    first, first_records = record_tool_calls([echo])
    second, second_records = record_tool_calls([echo])
    async with anyio.create_task_group() as group:
        group.start_soon(first[0].call, '{"text": "a"}')
        group.start_soon(second[0].call, '{"text": "b"}')
    assert [r.result for r in first_records] == ["A"]
    assert [r.result for r in second_records] == ["B"]


async def test_a_call_cancelled_from_outside_keeps_a_note() -> None:
    tools, records = record_tool_calls([hang])
    with anyio.move_on_after(0.05):
        await tools[0].call("{}")
    assert records == [ToolCallRecord("hang", {}, "error: cancelled before it finished")]
