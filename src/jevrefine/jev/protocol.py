"""`SystemOneClient`: what a judge needs from whatever answers its questions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .questions import Question, State
    from .responses import SystemOneResponse

__all__ = ["SystemOneClient"]


@runtime_checkable
class SystemOneClient(Protocol):
    """Answers Jev's typed questions about a state.

    `JudgeClient` (the Jev API) and `ModelJudgeClient` (any chat model) implement it; so can a
    test double with a matching `system_one` method.
    """

    async def system_one(
        self,
        state: State,
        questions: Mapping[str, Question | Mapping[str, Any]],
        *,
        model: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - pinned by the protocol
    ) -> SystemOneResponse:
        """Answer `questions` about `state`; the answers come back under the same ids."""
        ...
