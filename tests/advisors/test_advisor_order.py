"""`order=` is checked by every advisor that takes it: strictly between the precedence bounds.

The Java library's advisor builders refuse `HIGHEST_PRECEDENCE` and `LOWEST_PRECEDENCE`
themselves (`order > HIGHEST_PRECEDENCE && order < LOWEST_PRECEDENCE`); so do these, with a
`UserError` that names the argument and the range.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

import jevrefine as jr
from jevrefine import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE, UserError, advisors
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, noul
from jevrefine.memory import InMemoryChatMemory

JEV = JudgeClient("sk-order-0123456789", base_url="http://127.0.0.1:9")
JUDGE = Judge(JEV, [noul("ok", Noul("Is `assistant_answer` ok?"))])


class _Retriever:
    async def retrieve(self, query: str, *, top_k: int | None = None) -> list[jr.Document]:
        return []


# Each advisor class that takes `order=`, with the other arguments it needs.
BUILDERS: dict[type, Callable[..., Any]] = {
    advisors.SelfRefineAdvisor: lambda **kw: advisors.SelfRefineAdvisor(JUDGE, **kw),
    advisors.GuardrailAdvisor: lambda **kw: advisors.GuardrailAdvisor(JEV, **kw),
    advisors.ToolCallingAdvisor: lambda **kw: advisors.ToolCallingAdvisor(**kw),
    advisors.MessageChatMemoryAdvisor: lambda **kw: advisors.MessageChatMemoryAdvisor(
        InMemoryChatMemory(), **kw
    ),
    advisors.RetrievalAdvisor: lambda **kw: advisors.RetrievalAdvisor(_Retriever(), **kw),
    advisors.LoggingAdvisor: lambda **kw: advisors.LoggingAdvisor(**kw),
    advisors.ToolIndex: lambda **kw: advisors.ToolIndex(JEV, **kw),
}


def test_every_advisor_that_takes_order_is_covered() -> None:
    taking = {
        value
        for value in vars(advisors).values()
        if inspect.isclass(value) and "order" in inspect.signature(value).parameters
    }
    assert taking == set(BUILDERS)


@pytest.mark.parametrize("advisor", list(BUILDERS), ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "bad",
    [
        HIGHEST_PRECEDENCE,
        LOWEST_PRECEDENCE,
        HIGHEST_PRECEDENCE - 1,
        LOWEST_PRECEDENCE + 1,
        10**30,
    ],
)
def test_the_bounds_and_beyond_are_refused_with_the_range(advisor: type, bad: int) -> None:
    with pytest.raises(UserError) as caught:
        BUILDERS[advisor](order=bad)
    message = str(caught.value)
    assert message.startswith(f"order={bad} is out of range: ")
    assert "strictly between HIGHEST_PRECEDENCE and LOWEST_PRECEDENCE" in message
    assert f"from {HIGHEST_PRECEDENCE + 1} to {LOWEST_PRECEDENCE - 1}" in message


@pytest.mark.parametrize("advisor", list(BUILDERS), ids=lambda c: c.__name__)
@pytest.mark.parametrize("bad", ["10", 1.5, True, None])
def test_an_order_that_is_no_whole_number_is_refused(advisor: type, bad: object) -> None:
    with pytest.raises(UserError, match=r"^order=.* is not a whole number: pass a whole number"):
        BUILDERS[advisor](order=bad)


@pytest.mark.parametrize("advisor", list(BUILDERS), ids=lambda c: c.__name__)
@pytest.mark.parametrize("good", [HIGHEST_PRECEDENCE + 1, LOWEST_PRECEDENCE - 1, 0, -5])
def test_anything_strictly_inside_is_kept(advisor: type, good: int) -> None:
    assert BUILDERS[advisor](order=good).order == good


def test_the_defaults_are_inside_the_bounds() -> None:
    for build in BUILDERS.values():
        assert HIGHEST_PRECEDENCE < build().order < LOWEST_PRECEDENCE
