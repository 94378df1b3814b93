"""Soak: 1,000 refinements in flight at once, with 5 % random faults on the model and the judge.

ChatClient + SelfRefineAdvisor + Judge on a `JudgeClient`, with `OpenAIChatModel`, through
`refine_iter` at concurrency 1,000. Both clients talk to the project's fake servers through
`_soak.FaultProxy`, a raw asyncio proxy that breaks about one request in twenty: a reset before
the answer or in its middle, 429 with `Retry-After`, 500, a stall past the client's timeout, a
200 whose body is not JSON. Which request meets which fault is a seeded hash of the refinement and
its request count, so every run meets the same faults. The servers and proxies run in a process
of their own, like real servers: what is measured here is the client.

Promises: one result per input (none lost, none twice); each failure is a typed
`JevrefineError` whose type and `is_transient` match the fault that ended it; an answer the judge
rejected, or a judge answer that could not be read, never ships as passed; no request is sent
more often than the retries allow, and a 429's `Retry-After` is waited out; afterwards no task is
left and no pooled connection is taken. Measured and printed, not asserted: the event loop's
longest stall, peak memory, wall time, faults per kind and outcomes.

    pytest tests/reliability/test_soak.py -s                                # what CI runs
    JEVREFINE_SOAK_TRACEMALLOC=1 pytest tests/reliability/test_soak.py -s   # + tracemalloc peak
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import re
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from _fullchain import judge_pool_in_use, model_pool_busy
from _soak import (
    REJECTED_FIRST,
    RETRY_AFTER_SECONDS,
    TRANSIENT_KINDS,
    ProxyLog,
    Seen,
    bad_answer_for,
)

import jevrefine as jr
from jevrefine.context_keys import REFINE_REPORT
from jevrefine.exceptions import (
    JevrefineError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
)
from jevrefine.jev import (
    JudgeClient,
    JudgeConnectionError,
    JudgeError,
    JudgeRateLimitError,
    JudgeResponseError,
    JudgeServerError,
    JudgeTimeoutError,
    Noul,
)
from jevrefine.judge import Judge
from jevrefine.judge.criteria import noul
from jevrefine.models.openai import OpenAIChatModel

HERE = Path(__file__).parent
TOTAL = int(os.environ.get("JEVREFINE_SOAK_N", "1000"))
SEED = 16
RATE = 0.05
TIMEOUT = float(os.environ.get("JEVREFINE_SOAK_TIMEOUT", "10.0"))
"""Both clients' timeout; a stall outlasts it."""
RETRIES = 2
ATTEMPTS = 2
"""Self-refine attempts at most (`max_repeat_attempts=1`)."""


@dataclass
class StallMonitor:
    """A task that sleeps 1 ms over and over: the longest gap past that is the loop's worst stall.

    It also samples the process's resident memory every 50 ms.
    """

    worst: float = 0.0
    worst_ended: float = 0.0
    """When the worst stall ended, in seconds since the monitor started."""
    rss: list[float] = field(default_factory=list)

    async def run(self) -> None:
        began = last_sample = time.perf_counter()
        while True:
            start = time.perf_counter()
            await anyio.sleep(0.001)
            now = time.perf_counter()
            if now - start - 0.001 > self.worst:
                self.worst, self.worst_ended = now - start - 0.001, now - began
            if now - last_sample > 0.05:
                self.rss.append(_rss_mb())
                last_sample = now


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


# -- what a fault must turn into ----------------------------------------------------------------

# The error type each fault ends a call with, once the retries are spent.
_MODEL_ERROR_OF: dict[str, type[JevrefineError]] = {
    "reset": ModelConnectionError,
    "reset_mid_body": ModelConnectionError,
    "stall": ModelTimeoutError,
    "429": ModelHTTPError,
    "500": ModelHTTPError,
    "malformed": ModelResponseError,
}
_JUDGE_ERROR_OF: dict[str, type[JevrefineError]] = {
    "reset": JudgeConnectionError,
    "reset_mid_body": JudgeConnectionError,
    "stall": JudgeTimeoutError,
    "429": JudgeRateLimitError,
    "500": JudgeServerError,
    "malformed": JudgeResponseError,
}
_TIMEOUTS = (ModelTimeoutError, JudgeTimeoutError)
_HANG_UPS = {"ConnectionResetError", "BrokenPipeError", "IncompleteReadError"}


def _check_error(error: JevrefineError, seen: list[Seen], kinds: dict[str, type]) -> bool:
    """The error is the one the last fault its call met must give, transient as that fault was.

    Returns whether it is a timeout that met no stall: a client timing out because its own loop
    was too busy, which the run reports (it is typed and transient, and not a server's fault).
    """
    last = seen[-1].fault if seen else None
    if last is None:
        # Nothing the servers did ended this call, so only the client's own clock can have.
        assert isinstance(error, _TIMEOUTS), (error, seen)
        assert error.is_transient
        return True
    if isinstance(error, _TIMEOUTS) and last != "stall":
        # A retry that timed out before it reached the server: the proxy never saw it.
        assert error.is_transient
        return True
    assert type(error) is kinds[last], f"{last} gave {error!r}"
    assert error.is_transient == (last in TRANSIENT_KINDS), (error, last)
    if isinstance(error, ModelHTTPError):
        assert str(error.status_code) == last, (error, last)
    return False


def _check_retry_after(seen: list[Seen]) -> None:
    """The request after a 429 came no sooner than its `Retry-After` allowed."""
    for first, after in itertools.pairwise(seen):
        if first.fault == "429":
            assert after.at - first.at >= RETRY_AFTER_SECONDS - 0.05, (first, after)


def _check_one(
    i: int,
    value: jr.ChatClientResponse | JevrefineError,
    model_seen: list[Seen],
    judge_seen: list[Seen],
    sent: tuple[int, int],
) -> tuple[str, bool]:
    """Check one refinement's result against the faults it met: (its outcome, a load timeout).

    `sent`: how many requests the model and the judge client began for it.
    """
    fail_closed = i % 2 == 1
    # No request sent more often than the retries allow: per call 1 + retries, and the servers
    # see no more than the clients sent, but for the one resend the Jev transport makes when a
    # pooled connection turns out dead before any answer (a reset on a reused connection).
    model_sent, judge_sent = sent
    assert model_sent <= ATTEMPTS * (1 + RETRIES), (i, model_sent)
    assert judge_sent <= ATTEMPTS * (1 + RETRIES), (i, judge_sent)
    assert len(model_seen) <= model_sent, (i, model_seen, model_sent)
    resets = sum(1 for s in judge_seen if s.fault == "reset")
    assert len(judge_seen) <= judge_sent + resets, (i, judge_seen, judge_sent)
    _check_retry_after(model_seen)
    _check_retry_after(judge_seen)
    if isinstance(value, JevrefineError):
        if isinstance(value, ModelError):
            load = _check_error(value, model_seen, _MODEL_ERROR_OF)
        else:
            assert isinstance(value, JudgeError), repr(value)
            load = _check_error(value, judge_seen, _JUDGE_ERROR_OF)
            # Fail open ships the answer on a judge outage; only fail closed raises it.
            assert fail_closed or not value.is_transient, (i, value)
        transient = " (transient)" if value.is_transient else ""
        return f"{type(value).__name__}{transient}", load
    # An answer: this input's, and nothing the judge could not read or rejected ships as passed.
    assert f"soak-{i}" in value.content, (i, value.content)
    assert not any(s.fault == "malformed" for s in model_seen + judge_seen), (i, judge_seen)
    report = value.context.get(REFINE_REPORT)
    outcome = getattr(report, "outcome", None)
    if outcome == "unjudged":
        # An outage of the judge, shipped by fail open: its last request broke, or it timed out
        # before its request got out (what the report's `load` counts).
        assert not fail_closed, i
        last = judge_seen[-1].fault if judge_seen else None
        assert last is None or last in TRANSIENT_KINDS, judge_seen
        return f"answer ({outcome})", last is None
    else:
        assert outcome == "passed", (i, outcome)
        # Every fifth first answer is rejected by the judge: what passed is the revision.
        revised = value.content.startswith("Revised")
        assert revised == (i % REJECTED_FIRST == 0), (i, value.content)
    return f"answer ({outcome})", False


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Rig:
    clients: tuple[jr.ChatClient, jr.ChatClient]
    """(fail-open, fail-closed): even inputs go through the first, odd through the second."""
    model: OpenAIChatModel
    judge_client: JudgeClient
    logs: dict[str, ProxyLog] = field(default_factory=dict)
    """What each proxy saw (`model`, `judge`), filled in when the servers stop."""
    sent: dict[str, Counter[int]] = field(default_factory=dict)
    """Requests each client began, per refinement (`model`, `judge`), counted where the raw core
    begins an exchange, before a connection is taken: attempts that never got out count too."""


_BODY_KEY = re.compile(rb"soak-(\d+)")


def _count_exchanges(core: Any, counter: Counter[int]) -> None:
    """Count each request a client on the transport's raw core begins (JudgeClient's own pool,
    the model's lean request; no httpx client, so no hooks), per refinement: counted as the
    exchange begins, before a connection is taken, so attempts that never got out count too."""
    exchange = core.exchange

    async def counting(*args: Any, **kwargs: Any) -> Any:
        match = _BODY_KEY.search(args[6])  # the body
        if match is not None:
            counter[int(match.group(1))] += 1
        return await exchange(*args, **kwargs)

    core.exchange = counting


@contextlib.contextmanager
def _servers(mode: str, rate: float) -> Iterator[tuple[dict[str, int], dict[str, ProxyLog]]]:
    """The fakes and their proxies in a process of their own: (ports, logs filled at exit)."""
    command = [sys.executable, str(HERE / "_soak.py"), str(SEED), str(rate), str(TIMEOUT), mode]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    logs: dict[str, ProxyLog] = {}
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    ) as process:
        assert process.stdout is not None
        try:
            ports = json.loads(process.stdout.readline())
            yield ports, logs
            # Closing stdin stops the servers; their last line is what the proxies saw.
            out, _ = process.communicate(timeout=60)
            data = json.loads(out)
            logs.update({name: ProxyLog.from_json(log) for name, log in data.items()})
        finally:
            if process.poll() is None:
                process.kill()


@contextlib.asynccontextmanager
async def _rig(total: int, mode: str = "faults", rate: float = RATE) -> AsyncIterator[Rig]:
    with _servers(mode, rate) as (ports, logs):
        model = OpenAIChatModel(
            "gpt-soak",
            base_url=f"http://127.0.0.1:{ports['model']}/v1",
            api_key="sk-soak",
            max_retries=RETRIES,
            timeout=TIMEOUT,
        )
        judge_client = JudgeClient(
            "jev-soak",
            base_url=f"http://127.0.0.1:{ports['judge']}",
            timeout=TIMEOUT,
            max_concurrency=total,  # sized to the batch: a queued call is never a timeout
        )
        judge = Judge(judge_client, [noul("grounded", Noul("Is it grounded?"), 0.5)])
        clients = tuple(
            jr.ChatClient(
                model,
                advisors=[
                    jr.SelfRefineAdvisor(
                        judge, max_repeat_attempts=ATTEMPTS - 1, judge_error_policy=policy
                    )
                ],
            )
            for policy in (jr.JudgeErrorPolicy.FAIL_OPEN, jr.JudgeErrorPolicy.FAIL_CLOSED)
        )
        rig = Rig((clients[0], clients[1]), model, judge_client, logs)
        rig.sent = {"model": Counter(), "judge": Counter()}
        # `call()` sends on the lean transport's raw core, below the SDK's httpx client.
        _count_exchanges(model._wire._post._pool, rig.sent["model"])  # type: ignore[attr-defined]
        _count_exchanges(judge_client._wire._pool, rig.sent["judge"])
        try:
            yield rig
        finally:
            await model.aclose()
            await judge_client.aclose()


@pytest.fixture(autouse=True)
def _restore_log_level() -> Iterator[None]:
    logger = logging.getLogger("jevrefine")
    level = logger.level
    yield
    logger.setLevel(level)


def _quiet_fail_open_warnings() -> None:
    # Each unjudged answer logs a warning, expected here; the fixture above restores the level.
    logging.getLogger("jevrefine").setLevel(logging.ERROR)


def _inputs(rig: Rig, total: int) -> Iterator[jr.PromptSpec]:
    for i in range(total):
        yield rig.clients[i % 2].prompt(f"Question soak-{i}: is the sky blue?")


@pytest.mark.slow
async def test_1000_refinements_under_5_percent_faults() -> None:
    """Promise: under 5 % faults on both servers, every input gets exactly one typed result."""
    _quiet_fail_open_warnings()
    trace = os.environ.get("JEVREFINE_SOAK_TRACEMALLOC") == "1"
    before = asyncio.all_tasks()
    monitor = StallMonitor()
    count: Counter[int] = Counter()
    results: dict[int, jr.ChatClientResponse | JevrefineError] = {}
    async with _rig(TOTAL) as rig:
        rss_start = _rss_mb()
        if trace:
            tracemalloc.start()
        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            group.start_soon(monitor.run)
            stream = jr.refine_iter(rig.clients[0], _inputs(rig, TOTAL), concurrency=TOTAL)
            async with contextlib.aclosing(stream):
                async for result in stream:
                    count[result.index] += 1
                    if result.error is not None:
                        # Typed, or the test stops here with the stray exception.
                        assert isinstance(result.error, JevrefineError), repr(result.error)
                        results[result.index] = result.error
                    else:
                        results[result.index] = result.unwrap()
            group.cancel_scope.cancel()
        wall = time.perf_counter() - start
        traced_peak = tracemalloc.get_traced_memory()[1] / 1e6 if trace else None
        if trace:
            tracemalloc.stop()
        # Nothing left behind: no task, no connection checked out.
        await anyio.lowlevel.checkpoint()
        leaked = {t for t in asyncio.all_tasks() - before if not t.done()}
        assert not leaked, leaked
        assert judge_pool_in_use(rig.judge_client) == 0
        assert model_pool_busy(rig.model) == 0
    model_log, judge_log = rig.logs["model"], rig.logs["judge"]

    # None lost, none twice.
    assert set(count) == set(range(TOTAL))
    assert max(count.values()) == 1
    outcomes: Counter[str] = Counter()
    load_timeouts = 0
    broken_promises: list[str] = []
    for i, value in sorted(results.items()):
        try:
            sent = (rig.sent["model"][i], rig.sent["judge"][i])
            outcome, load = _check_one(i, value, model_log.requests[i], judge_log.requests[i], sent)
        except AssertionError as exc:  # gathered, so the figures below are printed anyway
            broken_promises.append(f"input {i}: {exc}")
            continue
        outcomes[outcome] += 1
        load_timeouts += load
    stats = {
        "refinements": TOTAL,
        "wall_s": round(wall, 1),
        "model_requests_sent": sum(rig.sent["model"].values()),
        "model_requests_reached_server": model_log.total(),
        "judge_requests_sent": sum(rig.sent["judge"].values()),
        "judge_requests_reached_server": judge_log.total(),
        "model_faults": dict(sorted(model_log.faults.items())),
        "judge_faults": dict(sorted(judge_log.faults.items())),
        "outcomes": dict(sorted(outcomes.items())),
        "refinements_ended_by_own_timeout": load_timeouts,
        "client_hang_ups_seen_by_proxies": len(model_log.broken) + len(judge_log.broken),
        "max_loop_stall_ms": round(monitor.worst * 1000, 1),
        "max_loop_stall_ended_at_s": round(monitor.worst_ended, 1),
        "rss_start_mb": round(rss_start, 1),
        "rss_peak_growth_mb": round(max(monitor.rss, default=rss_start) - rss_start, 1),
        "tracemalloc_peak_mb": None if traced_peak is None else round(traced_peak, 1),
    }
    print(f"\nsoak: {json.dumps(stats)}")
    assert not broken_promises, "\n".join(broken_promises[:10])
    # Every request belonged to a refinement, and the proxies read each one whole: a connection
    # they lost was the client hanging up (a timeout), never a request they could not parse.
    assert model_log.unkeyed == judge_log.unkeyed == 0
    for log in (model_log, judge_log):
        assert {b.split(":")[0] for b in log.broken} <= _HANG_UPS, log.broken
    if TOTAL >= 1000:  # the seed is such that every kind of fault happens on both sides
        for log in (model_log, judge_log):
            assert set(log.faults) == TRANSIENT_KINDS | {"malformed"}, log.faults


@pytest.mark.slow
async def test_a_judge_answer_that_is_no_answer_never_passes() -> None:
    """Promise: when the judge's last answer was not a valid answer, the result is not `passed`.

    200 refinements; a fifth of the judge's answers are 200s whose JSON is no valid answer to the
    question asked (`_soak.BAD_ANSWERS`), the model never breaks. Whatever the client makes of such
    an answer (a typed error, a failed verdict and another attempt), it never approves.
    """
    _quiet_fail_open_warnings()
    total = 200
    results: dict[int, jr.ChatClientResponse | JevrefineError] = {}
    async with _rig(total, mode="bad-answers", rate=0.2) as rig:
        stream = jr.refine_iter(rig.clients[0], _inputs(rig, total), concurrency=total)
        async with contextlib.aclosing(stream):
            async for result in stream:
                assert isinstance(result.error, JevrefineError | None), repr(result.error)
                results[result.index] = result.error or result.unwrap()
    judge_log = rig.logs["judge"]
    assert set(results) == set(range(total))
    approved: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for i, value in sorted(results.items()):
        seen = judge_log.requests[i]
        if not seen or seen[-1].fault != "malformed":
            continue
        if isinstance(value, JevrefineError):
            outcome = type(value).__name__
        else:
            outcome = str(getattr(value.context.get(REFINE_REPORT), "outcome", None))
            if outcome == "passed":
                approved[bad_answer_for(i)] += 1
        outcomes[f"{bad_answer_for(i)} -> {outcome}"] += 1
    print(f"\nbad answers: {json.dumps(dict(sorted(outcomes.items())))}")
    assert sum(outcomes.values()) >= 20  # the seed gives every bad answer a few refinements
    assert not approved, f"approved after a bad answer: {dict(approved)}"
