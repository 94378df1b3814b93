"""The judge's failures through the whole chain, under both `JudgeErrorPolicy` values.

Promises: an outage of the judge (5xx, resets, after the client's retries) fails open with a
warning under `FAIL_OPEN`, and raises the typed error under `FAIL_CLOSED`; a misconfiguration
(401) or an unreadable answer raises under both; a call that raises records no turn in memory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from _fullchain import full_chain, memory_is_consistent

from jevrefine.advisors.self_refine import JudgeErrorPolicy
from jevrefine.jev import (
    JudgeAuthenticationError,
    JudgeConnectionError,
    JudgeError,
    JudgeResponseError,
    JudgeServerError,
)
from jevrefine.testing import FakeJevServer

FAULTS: dict[str, tuple[Callable[[FakeJevServer], None], type[JudgeError], bool]] = {
    "503 persists": (lambda s: s.fail(503, times=3), JudgeServerError, True),
    "reset persists": (lambda s: s.drop_connections(times=4), JudgeConnectionError, True),
    "401": (lambda s: s.fail(401), JudgeAuthenticationError, False),
    "malformed answer": (lambda s: s.malformed(), JudgeResponseError, False),
}


@pytest.mark.parametrize("policy", list(JudgeErrorPolicy))
@pytest.mark.parametrize("fault", list(FAULTS))
async def test_judge_failure_under_each_policy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fault: str, policy: JudgeErrorPolicy
) -> None:
    inject, error, transient = FAULTS[fault]
    caplog.set_level(logging.WARNING, logger="jevrefine")
    async with full_chain(tmp_path / "memory.db", judge_error_policy=policy) as chain:
        await chain.client.prompt("warm up").advisors(conversation_id="c").content()
        inject(chain.judge_server)
        before = len(chain.judge_server.requests)
        call = chain.client.prompt("question").advisors(conversation_id="c")
        if transient and policy is JudgeErrorPolicy.FAIL_OPEN:
            answer = await call.content()
            assert "value of k" in answer  # the unjudged answer ships
            assert any(r.levelno == logging.WARNING for r in caplog.records)
            expected_turns = 2
        else:
            with pytest.raises(error):
                await call.content()
            expected_turns = 1  # the failed call left no half turn behind
        sent = len(chain.judge_server.requests) - before
        # Transient faults: 1 + 2 retries (a reset on a pooled connection adds one resend).
        assert sent in ((3, 4) if transient else (1,))
        turns, whole = await memory_is_consistent(chain.memory)
        assert whole
        assert turns == expected_turns
