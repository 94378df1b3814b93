"""`@tool`: names, descriptions, schemas, argument validation, sync tools in threads, timeouts."""

from __future__ import annotations

import json
import threading
import time
from typing import Literal

import anyio
import pydantic
import pytest

import jevrefine as jr
from jevrefine.tools import (
    FunctionTool,
    ToolArgumentsError,
    ToolCallback,
    ToolTimeoutError,
    tool,
)


@tool
async def weather(location: str, unit: Literal["C", "F"] = "C") -> str:
    """Get the current weather for a location.

    Longer explanation that the model also reads.

    Args:
        location: a city name,
            for example "Paris".
        unit: the temperature unit.

    Returns:
        A short report.
    """
    return f"{location}: 21 {unit}"


class Point(pydantic.BaseModel):
    x: int
    y: int


def test_name_description_and_schema_come_from_the_function() -> None:
    assert isinstance(weather, ToolCallback)
    assert weather.name == "weather"
    assert weather.description == (
        "Get the current weather for a location.\n\nLonger explanation that the model also reads."
    )
    schema = weather.parameters_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["location"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["location"]["type"] == "string"
    assert schema["properties"]["location"]["description"] == 'a city name, for example "Paris".'
    assert schema["properties"]["unit"]["enum"] == ["C", "F"]
    assert schema["properties"]["unit"]["default"] == "C"
    assert "title" not in schema
    assert weather.return_direct is False


def test_options_override_name_and_description() -> None:
    @tool(name="lookup", description="Look it up.", return_direct=True, timeout=2)
    def find(key: str) -> str:
        return key

    assert isinstance(find, FunctionTool)
    assert (find.name, find.description, find.return_direct, find.timeout) == (
        "lookup",
        "Look it up.",
        True,
        2,
    )
    assert find("k") == "k"  # the decorated object still calls the function


def test_tool_is_exported_at_the_top_level() -> None:
    assert jr.tool is tool
    assert jr.FunctionTool is FunctionTool


async def test_call_validates_and_converts_arguments() -> None:
    @tool
    async def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    assert await add.call('{"a": "2", "b": 3}') == "5"  # lax mode: "2" is an int
    assert await add.call('{"a": 2}') == "3"
    assert await weather.call('{"location": "Paris", "unit": "F"}') == "Paris: 21 F"


async def test_non_string_results_are_json() -> None:
    @tool
    async def origin(shift: int) -> Point:
        """The origin, shifted."""
        return Point(x=shift, y=0)

    @tool
    def listing() -> list[dict[str, object]]:
        """A list."""
        return [{"a": 1, "b": None}]

    assert json.loads(await origin.call('{"shift": 2}')) == {"x": 2, "y": 0}
    assert json.loads(await listing.call("")) == [{"a": 1, "b": None}]


async def test_nested_model_parameters_are_validated() -> None:
    @tool
    def norm(point: Point) -> int:
        """Manhattan norm."""
        return abs(point.x) + abs(point.y)

    assert "$defs" in norm.parameters_schema
    assert await norm.call('{"point": {"x": -3, "y": 4}}') == "7"
    with pytest.raises(ToolArgumentsError, match=r"point\.y: Field required"):
        await norm.call('{"point": {"x": 1}}')


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object, got list"),
        ("{}", "location: Field required"),
        ('{"location": 5}', "location: Input should be a valid string"),
        ('{"location": "x", "unit": "K"}', "unit: Input should be 'C' or 'F'"),
        ('{"location": "x", "extra": 1}', "extra: Extra inputs are not permitted"),
    ],
)
async def test_invalid_arguments_say_what_was_wrong(arguments: str, expected: str) -> None:
    with pytest.raises(ToolArgumentsError, match="weather") as info:
        await weather.call(arguments)
    assert expected in str(info.value)
    assert info.value.tool_name == "weather"


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    seen: list[int] = []

    @tool
    def where() -> str:
        """Which thread."""
        seen.append(threading.get_ident())
        return "ok"

    assert await where.call("{}") == "ok"
    assert seen
    assert seen[0] != threading.get_ident()


async def test_sync_tool_timeout_abandons_the_thread() -> None:
    finished = threading.Event()

    @tool(timeout=0.1)
    def slow() -> str:
        """Slow."""
        time.sleep(0.6)
        finished.set()
        return "late"

    started = time.perf_counter()
    with pytest.raises(ToolTimeoutError, match=r"'slow' timed out after 0\.1 s"):
        await slow.call("{}")
    assert time.perf_counter() - started < 0.5  # did not wait for the thread
    assert not finished.is_set()
    # The thread finishes on its own; wait for it so it does not outlive the test.
    await anyio.to_thread.run_sync(finished.wait, 5)
    assert finished.is_set()


async def test_async_tool_timeout() -> None:
    @tool(timeout=0.05)
    async def hang() -> str:
        """Hang."""
        await anyio.sleep(10)
        return "never"

    with pytest.raises(ToolTimeoutError) as info:
        await hang.call("{}")
    assert info.value.timeout == 0.05


async def test_tool_errors_propagate_from_call() -> None:
    @tool
    async def boom() -> str:
        """Fail."""
        raise RuntimeError("kaput")

    with pytest.raises(RuntimeError, match="kaput"):
        await boom.call("{}")


def test_bad_functions_are_rejected() -> None:
    def star(*args: int) -> int:
        return 0

    def private(_x: int) -> int:
        return 0

    with pytest.raises(jr.UserError, match=r"takes \*args"):
        tool(star)
    with pytest.raises(jr.UserError, match="'_x'"):
        tool(private)
    with pytest.raises(jr.UserError, match="not allowed"):
        tool(name="has space")(lambda: 1)
    with pytest.raises(jr.UserError, match="timeout"):
        tool(timeout=0)(lambda: 1)
