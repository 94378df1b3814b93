"""Cancellation at chosen and random points of the full chain: nothing left running or leaked.

Each case cancels one call while it is inside the model call, a tool, the judge call or the
judge's retry backoff (a probe says when it got there; a seeded random offset moves the cancel
around inside that phase), then checks the promises: no task of ours still running, no pooled
connection held (both pools' stats), SQLite chat memory holding whole turns only, and the same
client still answering afterwards.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import anyio
import pytest
from _fullchain import (
    Chain,
    full_chain,
    judge_pool_in_use,
    memory_is_consistent,
    model_pool_busy,
)

import jevrefine as jr

POINTS = ["model", "tool", "judge", "backoff"]


def _our_tasks(before: set[asyncio.Task[object]]) -> set[asyncio.Task[object]]:
    current = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t not in before and t is not current and not t.done()}


async def _settle(chain: Chain) -> None:
    """Give closing connections and finishing threads a moment; bounded."""
    for _ in range(100):
        if judge_pool_in_use(chain.judge_client) == 0 and model_pool_busy(chain.model) == 0:
            return
        await anyio.sleep(0.01)


async def _assert_clean(chain: Chain, before: set[asyncio.Task[object]], turns: int) -> None:
    await _settle(chain)
    assert _our_tasks(before) == set()
    assert judge_pool_in_use(chain.judge_client) == 0
    assert model_pool_busy(chain.model) == 0
    counted, whole = await memory_is_consistent(chain.memory)
    assert whole
    assert counted == turns


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("point", POINTS)
async def test_cancelled_call_leaves_nothing_behind(tmp_path: Path, point: str, seed: int) -> None:
    """Promise: a cancelled call stops, leaks nothing, records no half turn; the client goes on."""
    rng = random.Random(f"{point}-{seed}")
    async with full_chain(tmp_path / "memory.db", latency=0.03, tool_delay=0.03) as chain:
        await chain.client.prompt("warm up").advisors(conversation_id="c").content()
        before = set(asyncio.all_tasks())
        for name in POINTS:
            chain.probes.get(name).clear()
        if point == "backoff":
            chain.judge_server.fail(503)  # the judge call retries: the cancel lands in its wait
        event = chain.probes.get(point)
        finished = False
        with anyio.fail_after(10):  # a hang is a failure, not a stuck suite
            async with anyio.create_task_group() as group:

                async def cancel_when_there() -> None:
                    while not event.is_set():  # noqa: ASYNC110 - set by a server thread
                        await anyio.sleep(0.001)
                    await anyio.sleep(rng.uniform(0, 0.015))
                    group.cancel_scope.cancel()

                group.start_soon(cancel_when_there)
                await chain.client.prompt("question").advisors(conversation_id="c").content()
                finished = True
                group.cancel_scope.cancel()
        assert not finished, f"the call ended before the cancel at {point}"
        await _assert_clean(chain, before, turns=1)
        # The same client, pools and memory still serve a whole call.
        answer = await chain.client.prompt("again").advisors(conversation_id="c").content()
        assert "value of k" in answer
        await _assert_clean(chain, before, turns=2)


@pytest.mark.parametrize("seed", range(3))
async def test_cancelled_batch_leaves_nothing_behind(tmp_path: Path, seed: int) -> None:
    """Promise: cancelling `refine_many` mid-way cancels every refinement in flight, cleanly."""
    rng = random.Random(seed)
    async with full_chain(tmp_path / "memory.db", latency=0.005, tool_delay=0.005) as chain:
        before = set(asyncio.all_tasks())
        ok = 0

        def count(result: object) -> None:
            nonlocal ok
            ok += 1

        # Far more than can finish before the cancel (at most 0.3 s), however fast the machine.
        prompts = [
            chain.client.prompt(f"question {i}").advisors(conversation_id=f"c{i % 5}")
            for i in range(400)
        ]
        with anyio.move_on_after(rng.uniform(0.05, 0.3)) as scope:
            await jr.refine_many(chain.client, prompts, concurrency=8, on_result=count)
        assert scope.cancelled_caught, "the batch ended before the cancel"
        await _settle(chain)
        assert _our_tasks(before) == set()
        assert judge_pool_in_use(chain.judge_client) == 0
        assert model_pool_busy(chain.model) == 0
        turns, whole = await memory_is_consistent(chain.memory)
        assert whole
        # A turn is recorded just before its result is handed back: a cancel may fall between.
        assert ok <= turns <= ok + 8
