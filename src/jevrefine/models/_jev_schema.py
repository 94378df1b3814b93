"""The JSON schema `entity(T, native=True)` sends, checked against a `JevChatModel`'s questions.

Every field of the schema needs a question of the same name whose answer fits the field's type:

- a `Choice` puts its label in the field: the field must accept a string, and when it is an enum
  (a `Literal` or an `Enum`), the enum must hold every option;
- a `Noul` or a `Score` puts a float in the field (0.97, 1.8): the field must accept a JSON
  number; `int` and `bool` fields are rejected, since such a value does not fit them.

Local `$ref`s (shared enums, `$defs`) and `anyOf`/`oneOf` alternatives (`X | None`) are followed,
`null` alternatives are ignored, and a field whose schema declares no type (`Any`) is accepted as
it is. The root must be an object, since the reply is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..exceptions import UserError
from ..jev.questions import Choice, Question
from ..structured import WRAPPER_KEY

__all__ = ["check_scalar", "check_schema", "is_list_target"]

# Guards against `$ref` cycles; real schemas nest far less deeply.
_MAX_DEPTH: Final = 16


def is_list_target(schema: Mapping[str, Any]) -> bool:
    """Whether `schema` is the `{"result": [...]}` wrapper `entity(list[X])` sends."""
    properties = schema.get("properties")
    if "title" in schema or not isinstance(properties, Mapping) or set(properties) != {WRAPPER_KEY}:
        return False
    return "array" in _types(_alternatives(properties[WRAPPER_KEY], schema, 0))


def check_scalar(
    schema: Mapping[str, Any], questions: Mapping[str, Question], *, target: str
) -> str:
    """The question whose answer is a single-value target (`entity(float)`, `entity(str)`).

    `schema` is the `{"result": ...}` wrapper `entity()` sends for a non-object `target`.

    Raises:
        UserError: more than one question (which answer would it be?), or a type that cannot
            hold the one answer (the message names the type to pass instead).
    """
    names = ", ".join(questions)
    if len(questions) != 1:
        raise UserError(
            f"entity({target}) asks for one value, but this JevChatModel answers "
            f"{len(questions)} questions ({names}); ask for a pydantic model, a dataclass or a "
            "TypedDict with one field per question, or give the JevChatModel a single question"
        )
    ((name, question),) = questions.items()
    inner = schema["properties"][WRAPPER_KEY]
    if isinstance(question, Choice):
        needed, wanted, answer = "string", "str", "a choice's label"
    else:
        needed, wanted, answer = "number", "float", f"a {question.type}'s value (such as 0.97)"
    types = _types(_alternatives(inner, schema, 0))
    if types and needed not in types:
        raise UserError(
            f"entity({target}) cannot hold the answer to {name!r}, {answer}; ask for "
            f"entity({wanted})"
        )
    # The enum rules of a field apply to the one value: check it as the question's field.
    check_schema({**schema, "properties": {name: inner}}, questions)
    return name


def check_schema(schema: Mapping[str, Any], questions: Mapping[str, Question]) -> tuple[str, ...]:
    """Check `schema` against `questions`; the schema's fields, in its order.

    Raises:
        UserError: a list target, a root that is not an object, a field no question answers
            (the message lists the questions) or a field whose type cannot hold the answer.
    """
    names = ", ".join(questions)
    if is_list_target(schema):
        raise UserError(
            "JevChatModel replies with one JSON object, one field per question, so it cannot fill "
            "a list; ask for a pydantic model, a dataclass or a TypedDict whose fields are named "
            f"after the questions ({names})"
        )
    root_types = _types(_alternatives(schema, schema, 0))
    if root_types and "object" not in root_types:
        raise UserError(
            f"JevChatModel replies with a JSON object, so it cannot produce "
            f"{' | '.join(sorted(root_types))}; ask for a pydantic model, a dataclass or a "
            "TypedDict"
        )
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ()
    for field, field_schema in properties.items():
        question = questions.get(field)
        if question is None:
            raise UserError(
                f"the requested type has a field {field!r} that no question answers; the "
                f"questions are: {names}. Name each question after the field it fills."
            )
        alternatives = _alternatives(field_schema, schema, 0)
        if isinstance(question, Choice):
            _require(field, alternatives, "string", "a choice's label (a str)")
            allowed = _enum_values(alternatives)
            if allowed is not None:
                missing = [label for label in question.options if label not in allowed]
                if missing:
                    raise UserError(
                        f"field {field!r} cannot hold the choice option(s) "
                        f"{', '.join(map(repr, missing))}; its values are "
                        f"{', '.join(map(repr, allowed))}. Use str, or an enum holding every "
                        "option."
                    )
        else:
            kind = "noul's truth value" if question.type == "noul" else "score's value"
            _require(field, alternatives, "number", f"a {kind} (a float such as 0.97)")
    return tuple(properties)


def _alternatives(schema: Any, root: Mapping[str, Any], depth: int) -> list[Mapping[str, Any]]:
    """The schemas a value may match: a local `$ref` followed, `anyOf`/`oneOf` expanded."""
    if not isinstance(schema, Mapping):
        return []
    if depth > _MAX_DEPTH:
        return [schema]
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if isinstance(target, Mapping):
            return _alternatives(target, root, depth + 1)
        return [schema]
    flattened: list[Mapping[str, Any]] = []
    for keyword in ("anyOf", "oneOf", "allOf"):
        options = schema.get(keyword)
        if isinstance(options, list):
            for option in options:
                flattened.extend(_alternatives(option, root, depth + 1))
    return flattened or [schema]


def _types(alternatives: list[Mapping[str, Any]]) -> set[str]:
    """The declared types across the alternatives, `null` left out."""
    types: set[str] = set()
    for alternative in alternatives:
        declared = alternative.get("type")
        if isinstance(declared, str):
            types.add(declared)
        elif isinstance(declared, list):
            types.update(t for t in declared if isinstance(t, str))
        elif "enum" in alternative or "const" in alternative:
            values = alternative.get("enum", [alternative.get("const")])
            types.update(_json_type(v) for v in values)
    types.discard("null")
    return types


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "object"


def _enum_values(alternatives: list[Mapping[str, Any]]) -> list[Any] | None:
    """The values the enum alternatives allow; `None` when an alternative allows any value."""
    values: list[Any] = []
    for alternative in alternatives:
        if "enum" in alternative and isinstance(alternative["enum"], list):
            values.extend(alternative["enum"])
        elif "const" in alternative:
            values.append(alternative["const"])
        elif alternative.get("type") != "null":
            return None
    return values


def _require(field: str, alternatives: list[Mapping[str, Any]], needed: str, answer: str) -> None:
    types = _types(alternatives)
    if types and needed not in types:
        wanted = "str" if needed == "string" else "float"
        raise UserError(
            f"field {field!r} is of type {' | '.join(sorted(types))} but receives {answer}; "
            f"declare it as {wanted}"
        )
