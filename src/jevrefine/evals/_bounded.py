"""Every check of an answer bounded in time: the worker process, and `python` checks in threads.

Why a process. A `regex` assertion, or a JSON schema's `pattern` / `patternProperties`, is
matched by Python's `re`, which backtracks: `^(a+)+$` against `"a" * 40 + "!"` runs for hours,
and while it runs on the event loop's thread nothing else happens — no timeout, no
cancellation, no Ctrl-C. A thread does not help (it cannot be stopped, and `re` holds the GIL).
An engine with a timeout (the `regex` package) would change the syntax and would still not
bound jsonschema, which calls `re` itself. So these checks run in `_check_worker.py`, a small
Python process of its own, with exactly `re`'s and jsonschema's semantics; the event loop only
waits on a pipe, so cancellation and Ctrl-C work at once, and a check that takes longer than
its bound has the process killed (a fresh one starts for the next check). The bound counts the
check alone: the worker's start (a Python interpreter's) is not part of it.

`python` assertions are user code, trusted like the case file that names them (see the evals
guide). A sync function runs in a daemon thread and an async one on the loop, both under the
same bound: past it the assertion fails and the thread, which cannot be stopped, is left to
finish on its own (a daemon thread never keeps the process alive). An async function that
blocks the loop itself cannot be bounded.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.buffered import BufferedByteReceiveStream

from ..exceptions import JevrefineError, UserError

__all__ = [
    "DEFAULT_CHECK_TIMEOUT",
    "CheckTimeout",
    "CheckWorker",
    "CheckWorkerError",
    "call_bounded",
    "check_timeout_of",
]

DEFAULT_CHECK_TIMEOUT: Final = 10.0
"""Seconds one check of one answer may take (a regex, a schema, a `python` function)."""
_START_TIMEOUT: Final = 60.0
"""Seconds the worker may take to start (a loaded machine; not counted in any check's bound)."""
_MAX_REPLY: Final = 1 << 20
_WORKER: Final = Path(__file__).with_name("_check_worker.py")


class CheckTimeout(Exception):
    """A check took longer than its bound (the caller turns it into a failed assertion)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"took longer than {seconds:g} s")
        self.seconds = seconds


class CheckWorkerError(JevrefineError):
    """The check worker could not start, or stopped on its own; the case errors."""


def check_timeout_of(value: Any) -> float:
    """`value` as a check bound in seconds, or a `UserError` saying what to pass."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise UserError(f"check_timeout must be a number of seconds above 0, got {value!r}")
    return float(value)


class CheckWorker:
    """The worker process that runs regex and schema checks, one at a time, each bounded.

    Use it as an async context manager (`evaluate` owns one for its run): the process starts at
    the first check that needs it and is killed on exit. Checks from concurrent cases take turns.
    """

    def __init__(self, *, timeout: float = DEFAULT_CHECK_TIMEOUT) -> None:
        self.timeout = check_timeout_of(timeout)
        """The bound of one check, in seconds."""
        self._lock = anyio.Lock()
        self._process: anyio.abc.Process | None = None
        self._replies: BufferedByteReceiveStream | None = None

    async def __aenter__(self) -> CheckWorker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the worker process (when one runs)."""
        process, self._process, self._replies = self._process, None, None
        if process is None:
            return
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            await process.aclose()

    async def search(self, pattern: str, text: str) -> str | None:
        """`re.search(pattern, text)`'s match (cut to 61 characters), or `None` for no match.

        Raises:
            CheckTimeout: the search took longer than the bound (the process is killed).
            CheckWorkerError: the worker failed.
        """
        reply = await self._ask({"op": "search", "pattern": pattern, "text": text})
        return None if reply.get("span") is None else str(reply.get("found", ""))

    async def schema_match(self, schema: Any, values: list[Any]) -> tuple[int | None, str]:
        """The index of the first of `values` that `schema` accepts, or `None` and why not.

        Raises:
            CheckTimeout: the validation took longer than the bound (the process is killed).
            CheckWorkerError: the worker failed.
        """
        reply = await self._ask({"op": "schema", "schema": schema, "values": values})
        index = reply.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return index, ""
        return None, str(reply.get("problem", "the schema does not match"))

    async def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        line = (json.dumps(request, allow_nan=False) + "\n").encode("ascii")
        async with self._lock:
            await self._started()
            process, replies = self._process, self._replies
            assert process is not None
            assert process.stdin is not None
            assert replies is not None
            finished = False
            try:
                with anyio.move_on_after(self.timeout) as scope:
                    await process.stdin.send(line)
                    raw = await replies.receive_until(b"\n", _MAX_REPLY)
                finished = not scope.cancelled_caught
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.IncompleteRead):
                await self.aclose()
                raise CheckWorkerError(
                    "the check worker stopped during a check (out of memory?); the case's "
                    "checks could not run"
                ) from None
            finally:
                if not finished:
                    # Timed out, or cancelled mid-exchange: its state is unknown, so it goes.
                    await self.aclose()
        if not finished:
            raise CheckTimeout(self.timeout)
        reply = json.loads(raw)
        if "error" in reply:
            raise CheckWorkerError(f"the check failed in the worker: {reply['error']}")
        return dict(reply)

    async def _started(self) -> None:
        if self._process is not None:
            return
        # -I: no user site, no PYTHON* variables, no current folder on the path.
        command = [sys.executable, "-I", str(_WORKER)]
        process = await anyio.open_process(command, stderr=subprocess.DEVNULL)
        assert process.stdout is not None
        replies = BufferedByteReceiveStream(process.stdout)
        self._process, self._replies = process, replies
        try:
            with anyio.fail_after(_START_TIMEOUT):
                ready = await replies.receive_until(b"\n", 64)
        except (TimeoutError, anyio.EndOfStream, anyio.IncompleteRead) as exc:
            await self.aclose()
            raise CheckWorkerError(
                f"the check worker did not start ({type(exc).__name__}): {_WORKER}"
            ) from None
        except BaseException:
            await self.aclose()
            raise
        if ready != b"ready":
            await self.aclose()
            raise CheckWorkerError(f"the check worker said {ready[:40]!r} instead of ready")


async def call_bounded(function: Callable[..., Any], seconds: float, *args: Any) -> Any:
    """`function(*args)`, awaited when it returns an awaitable, bounded by `seconds`.

    A sync function runs in a daemon thread, so the loop stays free and a cancellation ends the
    wait at once; the thread, which cannot be stopped, finishes on its own.

    Raises:
        CheckTimeout: past `seconds`.
        Exception: whatever the function raised.
    """
    import inspect

    if inspect.iscoroutinefunction(function):
        with anyio.move_on_after(seconds):
            return await function(*args)
        raise CheckTimeout(seconds)
    with anyio.move_on_after(seconds):
        returned = await _in_daemon_thread(function, *args)
        if inspect.isawaitable(returned):
            returned = await returned
        return returned
    raise CheckTimeout(seconds)


async def _in_daemon_thread(function: Callable[..., Any], *args: Any) -> Any:
    done = anyio.Event()
    box: dict[str, Any] = {}
    token = anyio.lowlevel.current_token()

    def target() -> None:
        try:
            box["value"] = function(*args)
        except BaseException as exc:  # handed to the awaiting task, raised there
            box["error"] = exc
        finally:
            # RuntimeError: the loop has ended, and nobody waits for this result any more.
            with contextlib.suppress(RuntimeError):
                anyio.from_thread.run_sync(done.set, token=token)

    thread = threading.Thread(target=target, name="jevrefine python check", daemon=True)
    thread.start()
    await done.wait()
    if "error" in box:
        raise box["error"]
    return box["value"]
