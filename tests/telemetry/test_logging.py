"""Standard `logging` under `jevrefine.*`: retries, fail-open decisions, exhausted attempts."""

from __future__ import annotations

import logging

import pytest

import jevrefine as jr
from jevrefine.jev import JudgeClient, Noul, RetryPolicy
from jevrefine.judge import Judge
from jevrefine.judge.criteria import noul
from jevrefine.testing import FakeJevServer, FunctionModel

SECRET = "sk-logging-SECRET-42"


async def _no_sleep(seconds: float) -> None:
    return None


def _all_text(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{r.name} {r.levelname} {r.getMessage()}" for r in caplog.records)


async def test_retries_and_a_fail_open_are_logged_without_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="jevrefine")
    async with (
        FakeJevServer() as server,
        JudgeClient(
            SECRET, base_url=server.base_url, retry=RetryPolicy(max_retries=1, sleep=_no_sleep)
        ) as jev,
    ):
        server.fail(503, times=2)
        judge = Judge(jev, [noul("ok", Noul("OK?"), 0.5)])
        client = jr.ChatClient(
            FunctionModel(lambda p: "answer"), advisors=[jr.SelfRefineAdvisor(judge)]
        )
        response = await client.prompt("q").call()
    assert response.context[jr.context_keys.REFINE_REPORT].outcome == "unjudged"
    retries = [r for r in caplog.records if r.name == "jevrefine.jev"]
    assert [r.levelno for r in retries] == [logging.INFO]
    assert "retry 1 of 1" in retries[0].getMessage()
    assert "JudgeServerError" in retries[0].getMessage()
    (fail_open,) = [r for r in caplog.records if r.name == "jevrefine.self_refine"]
    assert fail_open.levelno == logging.WARNING
    assert "unjudged" in fail_open.getMessage()
    text = _all_text(caplog)
    assert SECRET not in text
    assert "Bearer" not in text


async def test_each_failed_attempt_and_the_exhausted_loop_are_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Seed 003's loop logging: a WARN per failed attempt with its feedback, and one when an
    answer that did not pass is shipped (an INFO when an attempt passes: the next test)."""
    caplog.set_level(logging.DEBUG, logger="jevrefine")
    async with (
        FakeJevServer(lambda state, questions: {"ok": 0.1}) as server,
        JudgeClient(SECRET, base_url=server.base_url) as jev,
    ):
        judge = Judge(jev, [noul("ok", Noul("OK?"), 0.5)])
        advisor = jr.SelfRefineAdvisor(judge, max_repeat_attempts=1)
        client = jr.ChatClient(FunctionModel(lambda p: "answer"), advisors=[advisor])
        await client.prompt("q").call()
    records = [r for r in caplog.records if r.name == "jevrefine.self_refine"]
    assert [r.levelno for r in records] == [logging.WARNING] * 3
    assert "attempt 1 failed the judge" in records[0].getMessage()
    assert "OK?" in records[0].getMessage()  # the feedback the retry carries
    assert "attempt 2 failed the judge" in records[1].getMessage()
    assert "returning attempt 2" in records[2].getMessage()
    assert SECRET not in _all_text(caplog)


async def test_a_passing_attempt_is_an_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="jevrefine")
    async with (
        FakeJevServer(lambda state, questions: {"ok": 0.9}) as server,
        JudgeClient(SECRET, base_url=server.base_url) as jev,
    ):
        judge = Judge(jev, [noul("ok", Noul("OK?"), 0.5)])
        advisor = jr.SelfRefineAdvisor(judge, max_repeat_attempts=1)
        client = jr.ChatClient(FunctionModel(lambda p: "answer"), advisors=[advisor])
        await client.prompt("q").call()
    records = [r for r in caplog.records if r.name == "jevrefine.self_refine"]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.INFO, "self-refine: attempt 1 passed the judge")
    ]
