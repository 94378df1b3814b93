"""Structured output: turn a Python type into a JSON schema, and the model's answer into that type.

`entity(T, native=...)` puts an `OutputSpec` on the request (`ChatClientRequest.output_spec`):
data, not prose. Advisors see the caller's text; the chain's terminal link renders the spec right
before the model call (`OutputSpec.render`), in one of two ways:

- **native** — the schema goes to the model as the response format, which enforces it;
- **prompt-based** — format instructions are appended to the last user message. They start with
  `FORMAT_INSTRUCTIONS_MARKER`; a state converter that receives the prompt as sent can strip them
  again with `strip_format_instructions`.

The prompt the model receives carries the spec it was rendered for (`Prompt.output_spec`), so a
model that needs it (`JevChatModel`) reads it rather than parsing the text.

Non-object targets (`list[X]`, `int`, ...) are wrapped as `{"result": ...}` because providers
require an object at the root of a response schema.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Final, Generic, TypeVar, cast

import pydantic

from .exceptions import StructuredOutputError, UserError
from .messages import Prompt, ResponseFormat, UserMessage

__all__ = [
    "FORMAT_INSTRUCTIONS_MARKER",
    "WRAPPER_KEY",
    "OutputSpec",
    "format_instructions_schema",
    "output_spec",
    "strip_format_instructions",
]

T = TypeVar("T")

FORMAT_INSTRUCTIONS_MARKER: Final = "\n\n[jevrefine:output-format]\n"
"""The line that starts the format instructions appended to the last user message."""

WRAPPER_KEY: Final = "result"
"""The field a non-object target's value sits under: `{"result": ...}`."""
_INSTRUCTIONS_LEAD: Final = (
    "Reply with a single JSON value that validates against this JSON schema, and nothing "
    "else: no explanation, no Markdown code fence.\n"
)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```", re.DOTALL)
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]+")


@dataclass(frozen=True, slots=True)
class OutputSpec(Generic[T]):
    """How to ask for, and read back, one target type."""

    target: Any
    """The requested type."""
    name: str
    """A schema name derived from the type (letters, digits, `_`, `-`)."""
    schema: dict[str, Any]
    """The JSON schema sent to the model (an object schema)."""
    wrapped: bool
    """Whether the value sits under `{"result": ...}` because the type is not an object."""
    adapter: pydantic.TypeAdapter[T]
    """Validates the decoded value."""
    native: bool = True
    """`True`: the schema is sent as the response format; `False`: as prompt instructions."""

    def with_native(self, native: bool) -> OutputSpec[T]:
        """This spec, sent natively (`True`) or as prompt-based instructions (`False`)."""
        return self if native is self.native else replace(self, native=native)

    def render(self, prompt: Prompt) -> Prompt:
        """`prompt` as the model receives it: the spec rendered, and carried on `output_spec`.

        Native: the response format on the options. Prompt-based: the format instructions
        appended to the last user message, so they come after anything an advisor added there
        (a self-refine retry's feedback).
        """
        if self.native:
            options = replace(prompt.options, response_format=self.response_format())
            rendered = prompt.with_options(options)
        else:
            rendered = self.with_instructions(prompt)
        return rendered.with_output_spec(self)

    def without_instructions(self, text: str) -> str:
        """`text` without the instructions `render` appended to it (unchanged if it has none).

        Compares with this spec's own instructions, so no text is parsed: a user message that
        merely quotes the marker, or an earlier turn's instructions, stays as it is.
        """
        if self.native:
            return text
        block = self.instructions()
        if text.endswith(block):
            return text[: -len(block)]
        return "" if text == block.lstrip() else text

    def response_format(self) -> ResponseFormat:
        """The native response format for this type."""
        return ResponseFormat(type="json_schema", name=self.name, schema=self.schema)

    def instructions(self) -> str:
        """The prompt-based format instructions (start with `FORMAT_INSTRUCTIONS_MARKER`)."""
        schema = json.dumps(self.schema, ensure_ascii=False, separators=(",", ":"))
        return f"{FORMAT_INSTRUCTIONS_MARKER}{_INSTRUCTIONS_LEAD}{schema}"

    def with_instructions(self, prompt: Prompt) -> Prompt:
        """`prompt` with the format instructions appended to its last user message."""
        messages = list(prompt.messages)
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, UserMessage):
                messages[index] = replace(message, text=message.text + self.instructions())
                return prompt.with_messages(messages)
        messages.append(UserMessage(self.instructions().lstrip()))
        return prompt.with_messages(messages)

    def parse(self, text: str, *, model_name: str | None = None) -> T:
        """Read the model's answer as the target type.

        Tolerates surrounding whitespace, a Markdown code fence, and prose around one JSON value.

        Raises:
            StructuredOutputError: the answer is not JSON or does not validate (see `raw_text`).
        """
        try:
            value = _decode_json(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested past the decoder
            raise StructuredOutputError(
                f"the model's answer is not JSON{_reason(exc)}, so it cannot be read as "
                f"{self.name}: {_preview(text)}. Use entity(..., native=True) with a model that "
                "supports structured output, or lower the temperature.",
                raw_text=text,
                target=self.name,
                model_name=model_name,
            ) from None
        if self.wrapped and isinstance(value, dict) and WRAPPER_KEY in value:
            value = cast("dict[str, Any]", value)[WRAPPER_KEY]
        try:
            return self.adapter.validate_python(value)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors()[:5]
            )
            raise StructuredOutputError(
                f"the model's answer is JSON but not a valid {self.name} ({problems}): "
                f"{_preview(text)}",
                raw_text=text,
                target=self.name,
                model_name=model_name,
            ) from exc


def output_spec(target: Any, *, native: bool = True) -> OutputSpec[Any]:
    """The output spec of a type, sent natively unless `native=False`.

    `target` may be a pydantic model, a dataclass, a TypedDict, `dict`, `list[X]` or a scalar
    (`int`, `str`, ...).
    """
    try:
        spec = _cached_spec(target)
    except TypeError:  # unhashable target: build it uncached
        spec = _build_spec(target)
    return spec.with_native(native)


@lru_cache(maxsize=256)
def _cached_spec(target: Any) -> OutputSpec[Any]:
    return _build_spec(target)


def _build_spec(target: Any) -> OutputSpec[Any]:
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(target)
        schema = adapter.json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
        raise UserError(
            f"cannot build a JSON schema for {target!r}: {exc}. Pass a pydantic model, a "
            "dataclass, a TypedDict, dict or list[...] of those."
        ) from exc
    name = _schema_name(target)
    wrapped = schema.get("type") != "object"
    if wrapped:
        defs = schema.pop("$defs", None)
        schema = {
            "type": "object",
            "properties": {WRAPPER_KEY: schema},
            "required": [WRAPPER_KEY],
        }
        if defs:
            schema["$defs"] = defs
    return OutputSpec(target=target, name=name, schema=schema, wrapped=wrapped, adapter=adapter)


def _schema_name(target: Any) -> str:
    raw = getattr(target, "__name__", None) or repr(target)
    name = _NAME_CHARS.sub("_", str(raw)).strip("_") or "response"
    return name[:64]


class _NotStrictJSON(ValueError):
    """A value Python's decoder accepts but JSON has not: NaN, Infinity, a float past the range."""


def _refuse_constant(name: str) -> Any:
    raise _NotStrictJSON(f"{name} is not a JSON number")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if value in (math.inf, -math.inf):
        # `1e999` or 310 digits: Python reads it as infinity, which no answer meant.
        raise _NotStrictJSON(f"the number {literal[:20]}... is beyond the range of a float")
    return value


def _loads(text: str) -> Any:
    """`json.loads`, strict: no NaN or Infinity, no float read as infinity.

    A number past Python's 4,300-digit limit raises `ValueError` as well.
    """
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)


def _reason(exc: BaseException) -> str:
    """Why decoding failed, when that is more than "not JSON" (a number out of range)."""
    if isinstance(exc, _NotStrictJSON):
        return f" ({exc})"
    if isinstance(exc, ValueError) and "digits" in str(exc):
        return " (a number has more than 4,300 digits)"
    return ""


def fenced_body(text: str) -> str | None:
    """The text inside the first Markdown code fence of `text`, stripped; `None` if none.

    A fence is three backticks, an optional language (`json`), the body, three backticks. This
    is the one fence reader of the package: the structured-output parser and the evals'
    `is-json` with `"fence": "allow"` both use it.
    """
    fence = _FENCE.search(text)
    return None if fence is None else fence.group(1).strip()


def strict_json_loads(text: str) -> Any:
    """`json.loads` as JSON itself reads numbers (`JSON.parse`): no NaN, no Infinity.

    Raises:
        ValueError: not JSON, a NaN / Infinity / -Infinity, a float past the range of a double,
            or a number of more than 4,300 digits (`json.JSONDecodeError` for the syntax).
        RecursionError: nested past the decoder's limit.
    """
    return _loads(text)


def strict_json_decoder() -> json.JSONDecoder:
    """A `json.JSONDecoder` that refuses what `strict_json_loads` refuses (for `raw_decode`)."""
    return json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def _decode_json(text: str) -> Any:
    stripped = text.strip()
    try:
        return _loads(stripped)
    except _NotStrictJSON:
        raise  # the same value would be found again inside a fence or prose
    except ValueError:
        pass
    body = fenced_body(stripped)
    if body is not None:
        return _loads(body)
    # Prose around one JSON value: take the outermost object or array.
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    if not starts:
        raise ValueError("no JSON value")
    start = min(starts)
    end = stripped.rfind("}" if stripped[start] == "{" else "]")
    if end <= start:
        raise ValueError("no JSON value")
    return _loads(stripped[start : end + 1])


def _preview(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    if not flat:
        return "(empty answer)"
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")


def _trailing_instructions(text: str) -> tuple[int, dict[str, Any]] | None:
    """Where the appended format instructions start in `text`, and their schema.

    Only an exact trailing block counts: the marker, the fixed sentence, then the schema as JSON up
    to the end of the text. A text that merely quotes the marker is not an instruction block.
    """
    index = text.rfind(FORMAT_INSTRUCTIONS_MARKER)
    start = index + len(FORMAT_INSTRUCTIONS_MARKER)
    if index < 0:
        # Appended to a prompt without a user message, the block starts the text, unindented.
        bare = FORMAT_INSTRUCTIONS_MARKER.lstrip()
        if not text.startswith(bare):
            return None
        index, start = 0, len(bare)
    rest = text[start:]
    if not rest.startswith(_INSTRUCTIONS_LEAD):
        return None
    try:
        schema = json.loads(rest[len(_INSTRUCTIONS_LEAD) :])
    except (ValueError, RecursionError):  # user text nested past the decoder: not our block
        return None
    if not isinstance(schema, dict):
        return None
    return index, cast("dict[str, Any]", schema)


def strip_format_instructions(text: str) -> str:
    """`text` without the format instructions `entity(..., native=False)` appended to it.

    Only the exact block `entity()` appends, at the end of `text`, is removed; a text that merely
    quotes the instructions is returned unchanged.
    """
    found = _trailing_instructions(text)
    return text if found is None else text[: found[0]]


def format_instructions_schema(text: str) -> dict[str, Any] | None:
    """The JSON schema named by the format instructions appended to `text`, or `None`."""
    found = _trailing_instructions(text)
    return None if found is None else found[1]
