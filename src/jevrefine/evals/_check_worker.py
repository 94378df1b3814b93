"""The check worker: a separate Python process that runs the checks that can take unbounded time.

A regular expression or a JSON schema's `pattern` can backtrack for hours on a hostile answer
(`^(a+)+$` against `"a" * 40 + "!"`), and Python's `re` cannot be interrupted: not by a
timeout, not by a cancellation, not by Ctrl-C. So these checks run here, in a process of their
own, and the parent (`jevrefine.evals._bounded.CheckWorker`) kills this process when a check
takes longer than its bound. The semantics stay exactly Python's `re` and jsonschema's.

This file is started as a script (`python -I _check_worker.py`), so it imports nothing of
jevrefine (whose import is slow): only the standard library, and jsonschema for schemas.
Requests and replies are JSON, one a line, on stdin and stdout (ASCII-escaped, so a line holds
no raw newline whatever the answer holds):

- `{"op": "search", "pattern": P, "text": T}` -> `{"span": [start, end], "found": TEXT}`
  (the match, `found` cut to 61 characters) or `{"span": null}`;
- `{"op": "schema", "schema": S, "values": [V, ...]}` -> `{"index": I}` (the first value the
  schema accepts) or `{"index": null, "problem": TEXT}` (why the last value does not match).

Any failure of one request is the reply `{"error": TEXT}`; the worker goes on.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from functools import lru_cache
from typing import Any

READY = "ready"
"""The first line the worker writes, once its imports are done."""
_FOUND_LIMIT = 61


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _search(request: dict[str, Any]) -> dict[str, Any]:
    match = _compiled(request["pattern"]).search(request["text"])
    if match is None:
        return {"span": None}
    return {"span": list(match.span()), "found": match.group(0)[:_FOUND_LIMIT]}


_VALIDATORS: dict[str, Any] = {}


def _validator(schema: Any) -> Any:
    key = json.dumps(schema, sort_keys=True)
    found = _VALIDATORS.get(key)
    if found is None:
        import jsonschema  # type: ignore[import-untyped,unused-ignore]
        import jsonschema_specifications  # type: ignore[import-untyped,unused-ignore]

        # The shipped metaschemas only: a reference is never fetched (no http, https, file).
        registry = jsonschema_specifications.REGISTRY
        found = jsonschema.validators.validator_for(schema)(schema, registry=registry)
        if len(_VALIDATORS) > 256:
            _VALIDATORS.clear()
        _VALIDATORS[key] = found
    return found


def _schema(request: dict[str, Any]) -> dict[str, Any]:
    import jsonschema

    validator = _validator(request["schema"])
    problem = "no value to check"
    for index, value in enumerate(request["values"]):
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is None:
            return {"index": index}
        path = "/".join(str(p) for p in error.absolute_path)
        where = f" at {path}" if path else ""
        problem = f"{error.message[:200]}{where}"
    return {"index": None, "problem": problem}


def _answer(line: str) -> dict[str, Any]:
    try:
        request = json.loads(line)
        if request.get("op") == "search":
            return _search(request)
        if request.get("op") == "schema":
            return _schema(request)
        return {"error": f"unknown request {str(request.get('op'))[:40]!r}"}
    except RecursionError:
        return {"error": "the check recursed past Python's limit"}
    except Exception as exc:  # one bad request is one error reply, never the end of the worker
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def main() -> None:
    """Answer requests until stdin closes."""
    # The parent owns this process: Ctrl-C reaches both, and the parent decides (it kills us).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import jsonschema  # noqa: F401 - imported before READY: its time is no check's time
        import jsonschema_specifications  # noqa: F401
    except ImportError:
        pass  # a schema request then answers with the ImportError
    out = sys.stdout
    out.write(READY + "\n")
    out.flush()
    # Bytes, split on "\n" alone (a text stream would split on "\r" too).
    for line in sys.stdin.buffer:
        out.write(json.dumps(_answer(line.decode("ascii", "replace"))) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
