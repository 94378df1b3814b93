"""Refine a Ray Dataset on many machines: async actors, each with its own client.

Needs the `[ray]` extra (`pip install "jevrefine[ray]"`).

```python
import ray
from jevrefine.ray import refine_dataset

def make_client() -> jr.ChatClient:  # runs once in each actor
    return jr.ChatClient(OpenAIChatModel("gpt-4o-mini"), advisors=[jr.SelfRefineAdvisor(judge)])

ray.init()  # or ray.init("ray://head-node:10001") for a cluster
ds = ray.data.read_json("prompts.jsonl")  # a "prompt" column
refined = refine_dataset(ds, make_client, num_actors=8, concurrency_per_actor=32)
refined.write_json("results/")  # adds answer, passed, attempts, tokens, error
```

Each actor builds one client with the factory (on first use, inside the actor's event loop, so
connection pools belong to that loop) and refines every batch it gets through it, at most
`concurrency_per_actor` refinements at once across all the batches it runs concurrently. A
failure stays in its row (`error`), it never fails the dataset.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import anyio

from .batch import RefineSummary
from .client import ChatClient
from .exceptions import UserError
from .jev.batch import run_all

if TYPE_CHECKING:
    import ray.data

__all__ = ["RESULT_COLUMNS", "ClientFactory", "refine_dataset"]

RESULT_COLUMNS: Final = ("answer", "passed", "attempts", "tokens", "error")
"""The columns `refine_dataset` adds to each row."""

ClientFactory: TypeAlias = Callable[[], ChatClient | Awaitable[ChatClient]]
"""Builds an actor's client (sync or async); it must be picklable (a module-level function)."""

_INSTALL_HINT = 'jevrefine.ray needs Ray Data: pip install "jevrefine[ray]"'


def refine_dataset(
    dataset: ray.data.Dataset,
    client_factory: ClientFactory,
    *,
    prompt_column: str = "prompt",
    num_actors: int | tuple[int, int] = 1,
    concurrency_per_actor: int = 16,
    batch_size: int = 64,
    num_cpus: float = 1.0,
    **ray_remote_args: Any,
) -> ray.data.Dataset:
    """Refine the `prompt_column` of every row; returns the dataset with the result columns.

    Lazy, as Ray Data is: nothing runs until the result is consumed (`write_*`, `take`,
    `iter_rows`, `materialize`).

    Args:
        dataset: rows with a text column of prompts.
        client_factory: builds each actor's `ChatClient` (called once per actor).
        prompt_column: the column holding the prompts.
        num_actors: a fixed number of actors, or `(min, max)` for an autoscaling pool.
        concurrency_per_actor: the most refinements one actor runs at once.
        batch_size: rows per batch sent to an actor.
        num_cpus: CPUs reserved per actor (refinement waits on the network: fractions are fine).
        **ray_remote_args: passed to `Dataset.map_batches` (e.g. `runtime_env`, `resources`).

    Returns:
        The dataset with the columns of `RESULT_COLUMNS` added: `answer` (str or null),
        `passed` (bool or null when unjudged or failed), `attempts` (int), `tokens` (model plus
        judge, int) and `error` (`"Type: message"` or null).

    Raises:
        UserError: bad arguments (checked here, before anything is scheduled).
        ImportError: Ray Data is not installed.
    """
    try:
        import ray.data  # noqa: F401 - checks the extra is installed before scheduling
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(_INSTALL_HINT) from exc
    if not callable(client_factory):
        raise UserError(f"client_factory must be callable, got {type(client_factory).__name__}")
    checks = {"concurrency_per_actor": concurrency_per_actor, "batch_size": batch_size}
    for name, value in checks.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UserError(f"{name} must be an int >= 1, got {value!r}")
    # An unknown schema (not executed yet) is allowed; a known one without the column is not.
    known = dataset.columns(fetch_if_missing=False)
    if known is not None and prompt_column not in known:
        raise UserError(f"the dataset has no column {prompt_column!r}; its columns: {known}")
    return dataset.map_batches(
        _RefineActor,
        batch_format="pandas",
        batch_size=batch_size,
        concurrency=num_actors,
        num_cpus=num_cpus,
        fn_constructor_args=(client_factory, prompt_column, concurrency_per_actor),
        **ray_remote_args,
    )


class _RefineActor:
    """The actor's state: one client, built lazily, and a limiter shared by its batches."""

    def __init__(self, factory: ClientFactory, prompt_column: str, concurrency: int) -> None:
        self._factory = factory
        self._prompt_column = prompt_column
        self._concurrency = concurrency
        # Both are created on first use, inside the event loop Ray runs async batches on.
        self._client: ChatClient | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._lock: anyio.Lock | None = None

    async def _ready(self) -> tuple[ChatClient, anyio.CapacityLimiter]:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:  # concurrent first batches must not build two clients
            if self._client is None:
                made = self._factory()
                client = await made if inspect.isawaitable(made) else made
                if not isinstance(client, ChatClient):
                    raise UserError(
                        f"client_factory returned {type(client).__name__}; return a ChatClient"
                    )
                self._client = client
                self._limiter = anyio.CapacityLimiter(self._concurrency)
        assert self._limiter is not None
        return self._client, self._limiter

    async def __call__(self, batch: Any) -> Any:
        """Refine one batch (a pandas DataFrame); returns it with the result columns."""
        client, limiter = await self._ready()

        async def refine(prompt: object) -> Any:
            # The limiter is per actor, so concurrent batches share one bound.
            async with limiter:
                return await client.prompt(str(prompt)).call()

        prompts = batch[self._prompt_column].tolist()
        # `run_all`'s own bound is the batch size: the actor-wide limiter is the real one.
        results = await run_all(refine, prompts, concurrency=max(1, len(prompts)))
        summaries = [RefineSummary.of(result) for result in results]
        out = batch.copy()
        out["answer"] = [s.answer for s in summaries]
        out["passed"] = [s.passed for s in summaries]
        out["attempts"] = [s.attempts for s in summaries]
        out["tokens"] = [s.tokens for s in summaries]
        out["error"] = [s.error for s in summaries]
        return out
