import anyio
import pytest

from jevrefine._fanout import run_all
from jevrefine.exceptions import UserError
from jevrefine.jev import (
    BatchResult,
    JudgeBadRequestError,
    JudgeClient,
    Noul,
    RetryPolicy,
    SystemOneRequest,
    system_one_all,
)
from jevrefine.testing import FakeJevServer


class Recorder:
    """A SystemOneClient double that records concurrency and fails on request."""

    def __init__(self, fail_on=()) -> None:
        self.fail_on = set(fail_on)
        self.in_flight = 0
        self.peak = 0
        self.started: list[str] = []

    async def system_one(self, state, questions, *, model=None, timeout=None) -> str | None:  # noqa: ASYNC109
        self.started.append(state)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await anyio.sleep(0.01)
            if state in self.fail_on:
                raise ValueError(f"bad {state}")
            return f"answer {state}"
        finally:
            self.in_flight -= 1


def _requests(n):
    return [SystemOneRequest(f"s{i}", {"q": Noul("q?")}) for i in range(n)]


async def test_results_are_aligned_and_failures_isolated() -> None:
    client = Recorder(fail_on={"s2", "s5"})
    results = await system_one_all(client, _requests(8), concurrency=3)
    assert [r.index for r in results] == list(range(8))
    assert [r.ok for r in results] == [True, True, False, True, True, False, True, True]
    assert results[0].unwrap() == "answer s0"  # type: ignore[comparison-overlap]  # Recorder answers str
    assert isinstance(results[2].error, ValueError)
    assert "s2" in str(results[2].error)
    with pytest.raises(ValueError, match="bad s5"):
        results[5].unwrap()
    assert client.peak == 3


async def test_concurrency_one_is_sequential_in_order() -> None:
    client = Recorder()
    await system_one_all(client, _requests(5), concurrency=1)
    assert client.peak == 1
    assert client.started == [f"s{i}" for i in range(5)]


async def test_fail_fast_raises_the_first_failure_and_stops() -> None:
    client = Recorder(fail_on={"s1"})
    with pytest.raises(ValueError, match="bad s1"):
        await system_one_all(client, _requests(50), concurrency=2, fail_fast=True)
    assert len(client.started) < 50


async def test_empty_and_bad_inputs() -> None:
    assert await system_one_all(Recorder(), []) == []
    with pytest.raises(UserError, match="concurrency"):
        await system_one_all(Recorder(), _requests(1), concurrency=0)
    with pytest.raises(UserError, match="SystemOneRequest"):
        await system_one_all(Recorder(), [("s", {})])  # type: ignore[list-item]


async def test_run_all_is_generic() -> None:
    async def double(x: int) -> int:
        if x == 3:
            raise KeyError(x)
        return 2 * x

    results = await run_all(double, [1, 2, 3, 4], concurrency=2)
    assert [r.value for r in results] == [2, 4, None, 8]
    assert isinstance(results[2].error, KeyError)
    assert results[1] == BatchResult(1, 4)


async def test_judge_client_method_against_the_fake_server() -> None:
    async def no_wait(seconds: float) -> None:
        return None

    async with (
        FakeJevServer() as server,
        JudgeClient("k", base_url=server.base_url, retry=RetryPolicy(sleep=no_wait)) as client,
    ):
        requests = _requests(6)
        requests[4] = SystemOneRequest("s4", {"q": Noul("q?")}, model="jev-9")
        results = await client.system_one_all(requests, concurrency=4)
        # Aligned: each slot holds the answer for its own state (default answers hash it).
        for i in (0, 3, 5):
            direct = await client.system_one(f"s{i}", {"q": Noul("q?")})
            assert results[i].unwrap().noul("q") == direct.noul("q")
    assert [r.ok for r in results] == [True, True, True, True, False, True]
    assert isinstance(results[4].error, JudgeBadRequestError)
    assert len({results[i].unwrap().noul("q").noul for i in (0, 1, 2, 3, 5)}) == 5
