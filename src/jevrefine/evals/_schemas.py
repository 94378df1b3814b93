"""The JSON schemas of `is-json` / `contains-json`, checked in full when the case file loads.

A schema is part of the case file, and so is checked before any model call is paid for:

- **no reference is ever fetched.** A `$ref` resolves inside the schema, or to one of the JSON
  Schema metaschemas jsonschema ships; anything else (`https://…`, `file://…`, a relative path)
  is refused. jsonschema's default registry still fetches unknown references (deprecated): an
  `http(s)` one on the event loop with no timeout, a `file://` one read from the local disk and
  then quoted into the retry feedback sent to the model provider.
- **no reference goes round without end.** `{"$ref": "#"}`, or an `allOf` that refers back to
  itself, recurses for every answer until Python's recursion limit: refused here, rather than a
  `RecursionError` per case after its model calls.
- the dialect (`$schema`) is one jsonschema knows, the schema is valid against it, and its
  `pattern`s compile.

`NO_RETRIEVAL` is the registry every validator of an answer is built with (in the check worker
too), so no reference is fetched even if one escaped this check.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

__all__ = ["IN_PLACE_KEYS", "schema_problem"]

IN_PLACE_KEYS: Final = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else")
"""Keywords whose subschemas apply to the same instance (they do not descend into it)."""
_MAP_IN_PLACE_KEYS: Final = ("dependentSchemas", "dependencies")
_REF_KEYS: Final = ("$ref", "$dynamicRef", "$recursiveRef")


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why `schema` cannot check answers (one clause), or `None` when it can.

    Needs jsonschema (the caller says how to install it).
    """
    import jsonschema  # type: ignore[import-untyped,unused-ignore]

    known = jsonschema.validators._META_SCHEMAS  # the dialects this jsonschema implements
    dialect = schema.get("$schema")
    if dialect is not None and dialect not in known:
        return (
            f"$schema {str(dialect)[:100]!r} is no JSON Schema dialect jsonschema knows; "
            "remove $schema, or name a draft such as "
            "https://json-schema.org/draft/2020-12/schema"
        )
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"the JSON schema is invalid: {exc.message[:300]}"
    except RecursionError:
        return "the JSON schema is nested too deeply"
    try:
        return _reference_problem(validator_class, schema)
    except RecursionError:
        return "the JSON schema is nested too deeply"


def no_retrieval_registry() -> Any:
    """The registry answers are checked with: the metaschemas jsonschema ships; nothing fetched."""
    import jsonschema_specifications  # type: ignore[import-untyped,unused-ignore]

    return jsonschema_specifications.REGISTRY


def _reference_problem(validator_class: Any, schema: Mapping[str, Any]) -> str | None:
    """Every reference resolves without a fetch, and no chain of them loops in place."""
    from referencing.exceptions import Unresolvable

    specification = _specification(validator_class)
    root = specification.create_resource(schema)
    resolver = no_retrieval_registry().resolver_with_root(root)
    # Every subschema, with the resolver that holds its base URI.
    nodes: dict[int, tuple[Any, Any]] = {}
    for resource, scoped in _subschemas(root, resolver):
        nodes[id(resource.contents)] = (resource.contents, scoped)
    edges: dict[int, list[int]] = {}
    for key, (contents, scoped) in nodes.items():
        targets = edges[key] = []
        for sub in _in_place(contents):
            targets.append(id(sub))
        for ref_key in _REF_KEYS:
            ref = contents.get(ref_key)
            if not isinstance(ref, str):
                continue
            try:
                resolved = scoped.lookup(ref)
            except Unresolvable:
                return (
                    f"{ref_key} {ref[:200]!r} does not resolve inside the schema; references "
                    "are never fetched (no http, https or file): put the definition under "
                    '"$defs" and refer to it as "#/$defs/NAME"'
                )
            if isinstance(resolved.contents, dict):
                target = id(resolved.contents)
                if target not in nodes:  # a metaschema jsonschema ships: it loops on nothing
                    continue
                targets.append(target)
    loop = _find_loop(edges)
    if loop is not None:
        return (
            "the JSON schema refers to itself without end (a $ref, through allOf, anyOf, oneOf, "
            "not, if/then/else or dependentSchemas, back to a schema it is part of, with no "
            f"step into the answer): {_shown(nodes[loop][0])}; a recursive schema must refer "
            'back only from inside "properties", "items" and the like'
        )
    return None


def _specification(validator_class: Any) -> Any:
    from referencing.jsonschema import specification_with

    return specification_with(validator_class.META_SCHEMA["$schema"])


def _subschemas(resource: Any, resolver: Any) -> Iterator[tuple[Any, Any]]:
    """Every object subschema of `resource` (itself included), each with its scoped resolver."""
    stack = [(resource, resolver)]
    while stack:
        current, scoped = stack.pop()
        if not isinstance(current.contents, dict):
            continue
        scoped = scoped.in_subresource(current)
        yield current, scoped
        stack.extend((sub, scoped) for sub in current.subresources())


def _in_place(contents: Mapping[str, Any]) -> Iterator[Any]:
    """The object subschemas that apply to the same instance as `contents`."""
    for key in IN_PLACE_KEYS:
        value = contents.get(key)
        for sub in value if isinstance(value, list) else [value]:
            if isinstance(sub, dict):
                yield sub
    for key in _MAP_IN_PLACE_KEYS:
        value = contents.get(key)
        if isinstance(value, dict):
            yield from (sub for sub in value.values() if isinstance(sub, dict))


def _find_loop(edges: Mapping[int, list[int]]) -> int | None:
    """A node on a cycle of `edges`, or `None` (iterative depth-first search: no recursion)."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if start in state:
            continue
        path = [(start, iter(edges.get(start, ())))]
        state[start] = 1
        while path:
            node, children = path[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                path.pop()
            elif state.get(child) == 1:
                return child
            elif child not in state:
                state[child] = 1
                path.append((child, iter(edges.get(child, ()))))
    return None


def _shown(contents: Any) -> str:
    import json

    text = json.dumps(contents, ensure_ascii=False)
    return text if len(text) <= 120 else text[:120] + "…"
