"""`RateLimitedJudgeClient`: any `SystemOneClient`, its calls held to a provider's limits.

```python
limiter = RateLimiter(RateLimit(requests_per_minute=3_000), name="judge")
judge = Judge(RateLimitedJudgeClient(JudgeClient(), limiter), criteria=[...])
```

Each judging call waits for its turn (a request slot and its estimated tokens: the state's
characters / 4), its reported usage corrects the estimate, and a 429 pauses every call sharing
the limiter before the call is tried again (see `jevrefine.rate_limit`). `refine_many(...,
judge_limit=...)` and `jevrefine run --judge-rpm` put one around the client of each judge the
batch uses (`limited_judge`).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from .. import _validate
from ..exceptions import UserError
from ..jev.protocol import SystemOneClient
from ..rate_limit import RateLimiter, reported_total, served_at
from ._judge import Judge

if TYPE_CHECKING:
    from ..jev.questions import Question, State
    from ..jev.responses import SystemOneResponse
    from ..messages import Usage
    from ._explain import FailureExplainer

__all__ = ["RateLimitedJudgeClient", "limited_judge"]

_CHARS_PER_TOKEN = 4


class RateLimitedJudgeClient:
    """A `SystemOneClient` whose calls wait their turn under `limiter`, and pause with it on 429.

    Args:
        wrapped: the client that answers (`JudgeClient`, `ModelJudgeClient`, any other).
        limiter: the judge provider's limits, shared by every call made through it.

    It answers as the wrapped client does, and writes failure feedback when that one does
    (`explain_failures`; those requests are not limited, as before a batch had limits). It holds
    no connection: whoever created the wrapped client closes it.

    Raises:
        UserError: `wrapped` has no `system_one`, or `limiter` is not a `RateLimiter`.
    """

    __slots__ = ("limiter", "wrapped")

    def __init__(self, wrapped: SystemOneClient, limiter: RateLimiter) -> None:
        if not callable(getattr(wrapped, "system_one", None)):
            raise UserError(
                f"RateLimitedJudgeClient wraps a SystemOneClient (JudgeClient or "
                f"ModelJudgeClient), got {type(wrapped).__name__}"
            )
        self.wrapped = wrapped
        """The client that answers."""
        self.limiter = _validate.instance(
            "limiter",
            limiter,
            RateLimiter,
            example="RateLimiter(RateLimit(requests_per_minute=3000), name='judge')",
        )
        """The limits the calls are held to."""

    async def system_one(
        self,
        state: State,
        questions: Mapping[str, Question | Mapping[str, Any]],
        *,
        model: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - pinned by the protocol
    ) -> SystemOneResponse:
        """The wrapped client's answer, once the call's turn comes; retried after a 429's pause.

        Raises:
            RateLimitTimeoutError: the turn would come after the caller's deadline.
        """
        # `timeout` only when given: a client written to the protocol's older shape has none.
        extra: dict[str, float] = {} if timeout is None else {"timeout": timeout}
        return await self.limiter.run(
            functools.partial(self.wrapped.system_one, state, questions, model=model, **extra),
            tokens=len(str(state)) // _CHARS_PER_TOKEN,
            used=_reported,
            server=self._server,
        )

    @property
    def explain_failures(self) -> bool:
        """Whether the wrapped client writes feedback for failed criteria (`ModelJudgeClient`)."""
        return getattr(self.wrapped, "explain_failures", False) is True

    async def explain(
        self, state: State, question: Question | Mapping[str, Any], detail: str
    ) -> tuple[str, Usage]:
        """The wrapped client's feedback for an answer that failed `question`."""
        explainer = cast("FailureExplainer", self.wrapped)
        return await explainer.explain(state, question, detail)

    def _server(self) -> str:
        return f"the judge {type(self.wrapped).__name__} at {served_at(self.wrapped)}"

    def __repr__(self) -> str:
        return f"RateLimitedJudgeClient({self.wrapped!r})"


def _reported(response: SystemOneResponse) -> object:
    return reported_total(response.usage)


def limited_judge(judge: Judge, limiter: RateLimiter) -> Judge:
    """A copy of `judge` whose judging calls go through `limiter` (`judge` is left as it is).

    Its escalation client, if any, is not limited (as before a batch had limits). A judge of code
    checks alone (no client) makes no call, and is returned as it is.
    """
    if judge.client is None:
        return judge
    limited = copy.copy(judge)
    limited.client = RateLimitedJudgeClient(judge.client, limiter)
    return limited
