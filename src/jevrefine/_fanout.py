"""Bounded-concurrency fan-out: `iter_all`, `run_all` and their `BatchResult`.

Results come back one `BatchResult` per item, each failure in its own slot, so one bad item never
costs the others. `iter_all` yields in completion order with bounded memory over any iterable;
`run_all` returns input order. This is the low floor: `system_one_all` (the Jev side),
`refine_iter`/`refine_many`, the CLI and the Ray actor all fan out through it.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from . import _validate

__all__ = ["BatchResult", "iter_all", "run_all"]

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


async def iter_all(
    function: Callable[[I], Awaitable[T]],
    items: Iterable[I] | AsyncIterable[I],
    *,
    concurrency: int = 4,
    fail_fast: bool = False,
) -> AsyncGenerator[BatchResult[T], None]:
    """Run `function` over `items`, at most `concurrency` at a time; yield results as they finish.

    Each `BatchResult` carries the item's input index, so callers can realign. Memory stays
    bounded whatever the input's length: `items` (a list, a generator or an async iterable) is
    read one item at a time, only when a worker is free, and finished results wait in a buffer of
    `concurrency` until the consumer takes them. The batch therefore holds at most about
    2 × `concurrency` items at once, and a slow consumer slows the batch rather than growing it.

    With `fail_fast=False` every item runs and each failure (an `Exception`) is yielded in its own
    slot. With `fail_fast=True` the first failure cancels the items in flight, starts no more, and
    is raised. Leaving the loop early (or being cancelled) cancels everything in flight; to have
    that happen at once rather than when the generator is collected, iterate inside
    `contextlib.aclosing(iter_all(...))`.

    Raises:
        UserError: `concurrency` is below 1.
    """
    concurrency = _validate.integer("concurrency", concurrency, minimum=1, example=4)
    done_in, done_out = anyio.create_memory_object_stream[BatchResult[T]](concurrency)
    input_error: list[Exception] = []
    next_item = _puller(items)

    async def work(workers: anyio.CancelScope) -> None:
        # Each worker pulls its next item itself, only once it is free: the input is never read
        # ahead, and an item costs no hand-over between tasks.
        while True:
            try:
                index, item = await next_item()
            except StopAsyncIteration:
                return
            except Exception as exc:
                # The input itself broke (not one item): stop the batch and raise it as is,
                # not wrapped in the task group's ExceptionGroup.
                input_error.append(exc)
                workers.cancel()
                return
            try:
                result = BatchResult(index, await function(item))
            except Exception as exc:
                result = BatchResult(index, None, exc)
            try:
                done_in.send_nowait(result)  # the common case: room in the buffer, no extra hop
            except anyio.WouldBlock:
                await done_in.send(result)  # the consumer is behind: wait for it (backpressure)

    async def run_workers() -> None:
        # The workers live in their own task group, so a fail-fast stop cancels them and never
        # reaches the consumer's task (which hosts this generator's task group).
        async with done_in, anyio.create_task_group() as workers:
            for _ in range(concurrency):
                workers.start_soon(work, workers.cancel_scope)

    failure: Exception | None = None
    closed = False
    async with done_out, anyio.create_task_group() as group:
        group.start_soon(run_workers)
        while True:
            try:
                result = await _next_result(done_out)
            except anyio.EndOfStream:
                break
            if fail_fast and result.error is not None:
                failure = result.error
                break
            try:
                yield result
            except GeneratorExit:
                # The consumer left early (`aclose()`): stop the workers here, as the task group
                # would otherwise wrap GeneratorExit in an exception group.
                closed = True
                break
        # Reached on a fail-fast stop or an early close: cancel what is in flight.
        group.cancel_scope.cancel()
    if closed:
        return
    if input_error:
        raise input_error[0]
    if failure is not None:
        raise failure


async def _next_result(results: MemoryObjectReceiveStream[BatchResult[T]]) -> BatchResult[T]:
    """The next result; waits (a checkpoint) only when none is ready. Raises EndOfStream.

    Many refinements finish in the same loop iteration: taking the ready ones without a
    checkpoint each keeps the consumer from becoming the bottleneck that fills the buffer.
    """
    try:
        return results.receive_nowait()
    except anyio.WouldBlock:
        return await results.receive()


def _puller(items: Iterable[I] | AsyncIterable[I]) -> Callable[[], Awaitable[tuple[int, I]]]:
    """A function the workers share to take the next `(index, item)`; raises StopAsyncIteration."""
    counter = itertools.count()
    if isinstance(items, AsyncIterable):
        iterator = aiter(items)
        # An async iterator cannot be advanced by two tasks at once: one at a time.
        lock = anyio.Lock()

        async def pull_async() -> tuple[int, I]:
            async with lock:
                item = await anext(iterator)
                return next(counter), item

        return pull_async
    sync_iterator = iter(items)

    async def pull() -> tuple[int, I]:
        # next() runs without an await, so no other worker can interleave with it.
        try:
            item = next(sync_iterator)
        except StopIteration:
            raise StopAsyncIteration from None
        return next(counter), item

    return pull


async def run_all(
    function: Callable[[I], Awaitable[T]],
    items: Iterable[I] | AsyncIterable[I],
    *,
    concurrency: int = 4,
    fail_fast: bool = False,
) -> list[BatchResult[T]]:
    """Run `function` over `items`, at most `concurrency` at a time, results in input order.

    With `fail_fast=False` (the default) every item runs and each failure (an `Exception`) lands
    in its own slot. With `fail_fast=True` the first failure cancels the items still running, is
    not started for the rest, and is raised. `items` may be an async iterable (see `iter_all`);
    the returned list holds one result per item.

    Raises:
        UserError: `concurrency` is below 1.
    """
    results: list[BatchResult[T]] = []
    async with aclosing(
        iter_all(function, items, concurrency=concurrency, fail_fast=fail_fast)
    ) as stream:
        async for result in stream:
            results.append(result)
    # Completion order -> input order; indexes are 0..n-1 with no gaps, so a sort suffices.
    results.sort(key=_index_of)
    return results


def _index_of(result: BatchResult[Any]) -> int:
    return result.index
