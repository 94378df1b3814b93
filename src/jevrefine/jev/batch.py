"""Bounded-concurrency batches: `system_one_all`, and the generic `run_all` under it.

Results come back aligned with the input, one `BatchResult` per item, each failure in its own
slot, so one bad request never costs the others. `run_all` is generic: `refine_many` reuses it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio

from ..exceptions import UserError

if TYPE_CHECKING:
    from .protocol import SystemOneClient
    from .questions import Question, State
    from .responses import SystemOneResponse

__all__ = ["BatchResult", "SystemOneRequest", "run_all", "system_one_all"]

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 - the conventional name of an item type


@dataclass(frozen=True, slots=True)
class BatchResult(Generic[T]):
    """The outcome of one item of a batch: its `value`, or the `error` it raised."""

    index: int
    """The item's position in the input."""
    value: T | None = None
    """The result, when the item succeeded."""
    error: Exception | None = None
    """The exception the item raised, when it failed."""

    @property
    def ok(self) -> bool:
        """Whether the item succeeded."""
        return self.error is None

    def unwrap(self) -> T:
        """The value; raises the item's error when it failed."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class SystemOneRequest:
    """One call of a batch: the arguments of `system_one`."""

    state: State
    """What the judge reads."""
    questions: Mapping[str, Question | Mapping[str, Any]]
    """Question id -> question."""
    model: str | None = None
    """The model for this call (default: the client's)."""


async def run_all(
    function: Callable[[I], Awaitable[T]],
    items: Sequence[I],
    *,
    concurrency: int = 4,
    fail_fast: bool = False,
) -> list[BatchResult[T]]:
    """Run `function` over `items`, at most `concurrency` at a time, results in input order.

    With `fail_fast=False` (the default) every item runs and each failure (an `Exception`) lands
    in its own slot. With `fail_fast=True` the first failure cancels the items still running, is
    not started for the rest, and is raised.

    Raises:
        UserError: `concurrency` is below 1.
    """
    if not isinstance(concurrency, int) or concurrency < 1:
        raise UserError(f"concurrency must be an int >= 1, got {concurrency!r}")
    items = list(items)
    results: list[BatchResult[T] | None] = [None] * len(items)
    next_index = 0
    first_error: list[Exception] = []

    async def worker(scope: anyio.CancelScope) -> None:
        nonlocal next_index
        # Workers pull the next index, so a long batch never holds more than `concurrency` tasks.
        while next_index < len(items):
            index = next_index
            next_index += 1
            try:
                value = await function(items[index])
            except Exception as exc:
                results[index] = BatchResult(index, None, exc)
                if fail_fast:
                    first_error.append(exc)
                    scope.cancel()
                    return
            else:
                results[index] = BatchResult(index, value)

    async with anyio.create_task_group() as group:
        for _ in range(min(concurrency, len(items))):
            group.start_soon(worker, group.cancel_scope)
    if first_error:
        raise first_error[0]
    return [r if r is not None else BatchResult(i) for i, r in enumerate(results)]


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
    for i, request in enumerate(requests):
        if not isinstance(request, SystemOneRequest):
            raise UserError(
                f"requests[{i}] is a {type(request).__name__}; pass SystemOneRequest(state, "
                "questions, model=None)"
            )

    async def call(request: SystemOneRequest) -> SystemOneResponse:
        return await client.system_one(request.state, request.questions, model=request.model)

    return await run_all(call, requests, concurrency=concurrency, fail_fast=fail_fast)
