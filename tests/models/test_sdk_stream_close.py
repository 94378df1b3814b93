"""A stream left early leaves none of the SDK's generators to the garbage collector.

Promise: when a consumer stops reading a model's stream (a bare `break`, no `aclose()`), the
adapter closes the SDK's stream *and* the generator chain it reads through (the SDK's
`__stream__`, its SSE decoder, httpx's `aiter_bytes` / `aiter_raw`), in order, as the event loop
finalizes the adapter's own generator. Left to the collector (openai's stream and its generator
form a cycle), they would all be finalized at once, and the loop would close `aiter_raw` in one
task while `aiter_bytes` closes it in another ("async generator already executing").
The collector is kept off for the test, so a chain left to it stays visible (as it does until
the collector runs).
"""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import jevrefine as jr
from jevrefine.models.anthropic import AnthropicChatModel
from jevrefine.models.openai import OpenAIChatModel
from jevrefine.testing import FakeAnthropicServer, FakeOpenAIServer

LONG_ANSWER = " ".join(f"word{i}" for i in range(300))
PROMPT = jr.Prompt((jr.UserMessage("go"),))
SDK_GENERATORS = frozenset({"__stream__", "_iter_events", "aiter_bytes", "aiter_raw", "__aiter__"})


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _Generators:
    """Every SDK and httpx async generator started while installed (the loop's hook wrapped)."""

    def __init__(self) -> None:
        self._seen: list[weakref.ref[Any]] = []
        self._hooks = sys.get_asyncgen_hooks()

    def __enter__(self) -> _Generators:
        first, finalizer = self._hooks

        def firstiter(agen: Any) -> None:
            module = agen.ag_frame.f_globals.get("__name__", "")
            if agen.ag_code.co_name in SDK_GENERATORS and module.startswith(
                ("openai", "anthropic", "httpx2")
            ):
                self._seen.append(weakref.ref(agen))
            if first is not None:
                first(agen)

        sys.set_asyncgen_hooks(firstiter, finalizer)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.set_asyncgen_hooks(*self._hooks)

    def suspended(self) -> list[str]:
        """Those still open (suspended mid-stream): left for the collector to close."""
        alive = (ref() for ref in self._seen)
        return [g.ag_code.co_qualname for g in alive if g is not None and g.ag_frame is not None]


async def _leave_early(model: Any) -> list[str]:
    """Leave the stream after three chunks; what is left open once the loop has finalized it."""
    seen = 0
    with anyio.fail_after(10), _Generators() as generators:
        async for _chunk in model.stream(PROMPT):  # no aclose(): the loop finalizes it
            seen += 1
            if seen == 3:
                break
        assert generators.suspended()  # the stream was open
        # The event loop's finalizer tasks (one per generator, each scheduled by the one
        # before) run while this waits.
        for _ in range(50):
            await anyio.sleep(0.01)
            if not generators.suspended():
                break
    assert seen == 3
    return generators.suspended()


@pytest.mark.usefixtures("collector_off")
async def test_openai_closes_the_sdks_stream_generators_when_left_early() -> None:
    async with FakeOpenAIServer() as server:
        server.script(LONG_ANSWER)
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="sk-test-0123456789")
        left = await _leave_early(model)
        await model.aclose()
    assert left == []


@pytest.mark.usefixtures("collector_off")
async def test_anthropic_closes_the_sdks_stream_generators_when_left_early() -> None:
    async with FakeAnthropicServer() as server:
        server.script(LONG_ANSWER)
        model = AnthropicChatModel("m", base_url=server.base_url, api_key="sk-test-0123456789")
        left = await _leave_early(model)
        await model.aclose()
    assert left == []
