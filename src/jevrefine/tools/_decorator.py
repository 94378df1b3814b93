"""`@tool`: a typed function, async or sync, becomes a `ToolCallback`.

```python
@tool
async def weather(location: str, unit: Literal["C", "F"] = "C") -> str:
    '''Get the current weather for a location.'''
    return f"{location}: 21 {unit}"
```

The name is the function's, the description the docstring's summary, and the parameters' JSON
schema comes from pydantic (with each parameter's description from the docstring's `Args:`).
The model's arguments are validated before the function runs; a sync function runs in a worker
thread so it never blocks the event loop.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any, overload

import anyio
import anyio.to_thread
import pydantic
import pydantic_core

from .. import _validate
from ..exceptions import UserError
from ._errors import ToolArgumentsError, ToolTimeoutError

__all__ = ["FunctionTool", "result_text", "tool"]

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class FunctionTool:
    """A tool made from a Python function by `@tool`; it implements `ToolCallback`.

    Calling the object (`weather("Paris")`) still calls the function, so it stays testable.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        return_direct: bool = False,
        timeout: float | None = None,
    ) -> None:
        if not callable(function):
            raise UserError(f"@tool needs a function, got {type(function).__name__}")
        timeout = _validate.number(
            "timeout", timeout, above=0, optional=True, unit="seconds", example=10.0
        )
        _validate.text("name", name, optional=True, example="weather")
        _validate.text("description", description, optional=True, example="Get the weather.")
        return_direct = _validate.boolean("return_direct", return_direct)
        self._function = function
        self._is_async = inspect.iscoroutinefunction(function)
        summary, arg_docs = _parse_docstring(inspect.getdoc(function) or "")
        self.name: str = name or function.__name__
        """The tool's name, as the model sees it."""
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise UserError(
                f"tool name {self.name!r} is not allowed; providers accept 1-64 letters, digits, "
                "'_' and '-'; pass @tool(name=...)"
            )
        self.description: str = description if description is not None else summary
        """What the tool does, for the model (the docstring's summary by default)."""
        self.return_direct: bool = return_direct
        """Whether the result ends the tool loop and becomes the response."""
        self.timeout: float | None = timeout
        """Seconds one call may take; `None` leaves only the tool loop's timeout."""
        self._arguments_model = _arguments_model(function, self.name, arg_docs)
        self.parameters_schema: Mapping[str, Any] = _schema_of(self._arguments_model)
        """The JSON schema of the arguments (an object schema)."""
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly, as if it were not decorated."""
        return self._function(*args, **kwargs)

    async def call(self, arguments: str) -> str:
        """Validate the model's JSON `arguments`, run the function, return its result as text.

        Raises:
            ToolArgumentsError: the arguments are not a JSON object that fits the parameters.
            ToolTimeoutError: the call took longer than `timeout`.
            Exception: whatever the function raises.
        """
        kwargs = self.validate_arguments(arguments)
        with anyio.move_on_after(self.timeout) as scope:
            result = await self._run(kwargs)
        if scope.cancelled_caught:
            raise ToolTimeoutError(self.name, self.timeout or 0.0)
        return result_text(result)

    def validate_arguments(self, arguments: str) -> dict[str, Any]:
        """The function's keyword arguments from the model's JSON, validated.

        Raises:
            ToolArgumentsError: the arguments are not a JSON object that fits the parameters.
        """
        try:
            raw = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:  # RecursionError: nested past the decoder
            raise ToolArgumentsError(
                f"the arguments for tool {self.name!r} are not valid JSON ({exc}); "
                "send a JSON object that matches the tool's parameters",
                tool_name=self.name,
            ) from None
        if not isinstance(raw, dict):
            raise ToolArgumentsError(
                f"the arguments for tool {self.name!r} must be a JSON object, "
                f"got {type(raw).__name__}",
                tool_name=self.name,
            )
        try:
            model = self._arguments_model.model_validate(raw)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolArgumentsError(
                f"invalid arguments for tool {self.name!r}: {problems}", tool_name=self.name
            ) from None
        return {field: getattr(model, field) for field in type(model).model_fields}

    async def _run(self, kwargs: dict[str, Any]) -> Any:
        if self._is_async:
            return await self._function(**kwargs)
        # A thread cannot be cancelled: on timeout or cancellation its result is abandoned and
        # the thread finishes on its own (documented on `tool`).
        call = functools.partial(self._function, **kwargs)
        result = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        if inspect.isawaitable(result):  # a sync def returning a coroutine (e.g. a lambda)
            return await result
        return result

    def __repr__(self) -> str:
        return f"FunctionTool(name={self.name!r}, return_direct={self.return_direct})"


@overload
def tool(function: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    timeout: float | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a typed function, async or sync, into a tool the model may call.

    Use it bare (`@tool`) or with options (`@tool(name=..., timeout=5)`).

    Args:
        function: the function; every parameter needs a type hint pydantic understands.
        name: the tool's name (the function's name by default).
        description: what the tool does (the docstring's summary by default).
        return_direct: end the tool loop with this tool's result as the response, instead of
            handing the result back to the model.
        timeout: seconds one call may take (`None`: only the tool loop's timeout applies).

    Returns:
        A `FunctionTool` (a `ToolCallback`), or a decorator when called with options only.

    Sync functions run in a worker thread. A thread cannot be cancelled: on timeout or
    cancellation its result is abandoned, the call is reported as timed out, and the thread
    finishes on its own. Prefer async tools for anything slow.
    """

    def decorate(fn: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            fn, name=name, description=description, return_direct=return_direct, timeout=timeout
        )

    if function is None:
        return decorate
    return decorate(function)


def result_text(result: Any) -> str:
    """A tool result as the text sent to the model: a `str` as is, anything else as JSON."""
    if isinstance(result, str):
        return result
    return pydantic_core.to_json(result).decode()


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The docstring's text before its first section, and the `Args:` descriptions by name."""
    summary: list[str] = []
    args: dict[str, list[str]] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            current = None
            continue
        if section is None:
            summary.append(line)
        elif section in ("args", "arguments", "parameters") and line.strip():
            match = _ARG_LINE.match(line.strip())
            if match and not line.startswith((" " * 8, "\t\t")):
                current = match.group(1).lstrip("*")
                args[current] = [match.group(2)]
            elif current is not None:
                args[current].append(line.strip())
    text = "\n".join(summary).strip()
    return text, {k: " ".join(p for p in v if p).strip() for k, v in args.items()}


def _arguments_model(
    function: Callable[..., Any], tool_name: str, arg_docs: Mapping[str, str]
) -> type[pydantic.BaseModel]:
    try:
        signature = inspect.signature(function)
        hints = _type_hints(function)
    except (TypeError, ValueError, NameError) as exc:
        raise UserError(f"cannot read the signature of tool {tool_name!r}: {exc}") from exc
    fields: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise UserError(
                f"tool {tool_name!r} takes *{parameter.name}; a tool's parameters must be named "
                "so the model can fill them — list them explicitly"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise UserError(
                f"tool {tool_name!r} has positional-only parameter {parameter.name!r}; "
                "tools are called with keyword arguments"
            )
        if parameter.name.startswith("_"):
            raise UserError(
                f"tool {tool_name!r} has parameter {parameter.name!r}; names starting with '_' "
                "cannot be sent by a model, rename it"
            )
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (
            annotation,
            pydantic.Field(default, description=arg_docs.get(parameter.name)),
        )
    # extra="forbid": an argument the tool does not take is reported back to the model.
    config = pydantic.ConfigDict(extra="forbid", protected_namespaces=())
    try:
        return pydantic.create_model(f"{tool_name}_arguments", __config__=config, **fields)
    except (pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise UserError(
            f"tool {tool_name!r} has a parameter pydantic cannot describe: {exc}"
        ) from exc


def _type_hints(function: Callable[..., Any]) -> dict[str, Any]:
    target = function
    if not inspect.isfunction(target) and not inspect.ismethod(target):
        target = getattr(function, "__call__", function)  # noqa: B004 - callable objects
    return typing.get_type_hints(target, include_extras=True)


def _schema_of(model: type[pydantic.BaseModel]) -> Mapping[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)  # the generated model's name means nothing to the model
    schema.setdefault("properties", {})
    return schema
