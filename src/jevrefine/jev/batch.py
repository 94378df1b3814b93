"""`system_one_all`: many `system_one` calls on any `SystemOneClient`, at a bounded concurrency.

Results come back aligned with the input, one `BatchResult` per request, each failure in its own
slot; the fan-out itself is the generic one in `jevrefine._fanout`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _validate
from .._fanout import BatchResult, run_all
from ..exceptions import UserError

if TYPE_CHECKING:
    from .protocol import SystemOneClient
    from .questions import Question, State
    from .responses import SystemOneResponse

__all__ = ["BatchResult", "SystemOneRequest", "system_one_all"]


@dataclass(frozen=True, slots=True)
class SystemOneRequest:
    """One call of a batch: the arguments of `system_one`."""

    state: State
    """What the judge reads."""
    questions: Mapping[str, Question | Mapping[str, Any]]
    """Question id -> question."""
    model: str | None = None
    """The model for this call (default: the client's)."""


async def system_one_all(
    client: SystemOneClient,
    requests: Sequence[SystemOneRequest],
    *,
    concurrency: int = 4,
    fail_fast: bool = False,
) -> list[BatchResult[SystemOneResponse]]:
    """Run many `system_one` calls on any `SystemOneClient`, at most `concurrency` at a time.

    Returns one `BatchResult` per request, aligned with the input; a failed call holds its error
    in its own slot (or, with `fail_fast=True`, the first failure cancels the rest and is raised).

    ```python
    results = await system_one_all(client, [SystemOneRequest(state, questions), ...])
    for result in results:
        print(result.index, result.unwrap().noul("is_grounded").noul if result.ok else result.error)
    ```
    """
    _validate.boolean("fail_fast", fail_fast)
    if isinstance(requests, str | bytes) or not isinstance(requests, Sequence):
        raise UserError(
            f"requests={_validate.shown(requests)} is not a list: pass [SystemOneRequest(state, "
            "questions), ...]"
        )
    for i, request in enumerate(requests):
        if not isinstance(request, SystemOneRequest):
            raise UserError(
                f"requests[{i}] is a {type(request).__name__}; pass SystemOneRequest(state, "
                "questions, model=None)"
            )

    async def call(request: SystemOneRequest) -> SystemOneResponse:
        return await client.system_one(request.state, request.questions, model=request.model)

    return await run_all(call, requests, concurrency=concurrency, fail_fast=fail_fast)
