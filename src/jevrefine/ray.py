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

The actor owns what the factory built and closes it when Ray Data retires the actor: the
client's model and the Jev and model judge clients its advisors hold (`SelfRefineAdvisor`'s
judge, `GuardrailAdvisor`'s client). Ray Data's only hook for that is the UDF's `__del__`, run on
a graceful actor exit, when the operator finishes (Ray releases before ray-project/ray#61700 run
it only with `DataContext._enable_actor_pool_on_exit_hook = True`). For anything else the
factory opens (a memory store, a tool's HTTP client), make the factory an async context manager
yielding the client: the actor enters it once and exits it at teardown.

```python
@contextlib.asynccontextmanager
async def make_client() -> AsyncIterator[jr.ChatClient]:
    async with OpenAIChatModel("gpt-4o-mini") as model, httpx2.AsyncClient() as http:
        yield jr.ChatClient(model, tools=[search_tool(http)])
```
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import anyio

from . import _validate
from ._fanout import run_all
from .batch import RefineSummary
from .client import ChatClient
from .exceptions import UserError
from .jev.client import JudgeClient
from .models.base import ChatModel

if TYPE_CHECKING:
    import ray.data

__all__ = ["RESULT_COLUMNS", "ClientFactory", "refine_dataset"]

RESULT_COLUMNS: Final = ("answer", "passed", "attempts", "tokens", "error")
"""The columns `refine_dataset` adds to each row."""

ClientFactory: TypeAlias = Callable[
    [], ChatClient | Awaitable[ChatClient] | AbstractAsyncContextManager[ChatClient]
]
"""Builds an actor's client: returns it (sync or async), or an async context manager yielding it
(entered once, exited when the actor is retired). It must be picklable (a module-level
function)."""

_CLOSE_TIMEOUT: Final = 30.0  # seconds an actor's teardown waits for its clients to close

_INSTALL_HINT = 'jevrefine.ray needs Ray Data: pip install "jevrefine[ray]"'
_log = logging.getLogger("jevrefine.ray")


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
    _check_arguments(
        client_factory, prompt_column, num_actors, concurrency_per_actor, batch_size, num_cpus
    )
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


def _check_arguments(
    client_factory: object,
    prompt_column: object,
    num_actors: object,
    concurrency_per_actor: object,
    batch_size: object,
    num_cpus: object,
) -> None:
    if not callable(client_factory):
        raise UserError(
            f"client_factory={_validate.shown(client_factory)} is not callable: pass a function "
            "that builds the ChatClient (called once per actor)"
        )
    _validate.text("prompt_column", prompt_column, nonblank=True, example="prompt")
    if isinstance(num_actors, tuple):
        if len(num_actors) != 2:
            raise UserError(
                f"num_actors={_validate.shown(num_actors)} is not a (min, max) pair: pass e.g. "
                "num_actors=(1, 8), or a number of actors"
            )
        low = _validate.integer("num_actors[0]", num_actors[0], minimum=1, example=1)
        _validate.integer("num_actors[1]", num_actors[1], minimum=low, example=max(low, 8))
    else:
        _validate.integer("num_actors", num_actors, minimum=1, example=4)
    _validate.integer("concurrency_per_actor", concurrency_per_actor, minimum=1, example=16)
    _validate.integer("batch_size", batch_size, minimum=1, example=64)
    _validate.number("num_cpus", num_cpus, minimum=0, example=1.0)


class _RefineActor:
    """One actor's state: its client (built lazily), a limiter shared by its batches.

    It also holds what closes the client when Ray retires the actor.
    """

    def __init__(self, factory: ClientFactory, prompt_column: str, concurrency: int) -> None:
        self._factory = factory
        self._prompt_column = prompt_column
        self._concurrency = concurrency
        # All are created on first use, inside the event loop Ray runs async batches on.
        self._client: ChatClient | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._lock: anyio.Lock | None = None
        self._owned: contextlib.AsyncExitStack | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    async def _ready(self) -> tuple[ChatClient, anyio.CapacityLimiter]:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:  # concurrent first batches must not build two clients
            if self._client is None:
                self._loop = asyncio.get_running_loop()
                self._loop_thread = threading.get_ident()
                owned = contextlib.AsyncExitStack()
                try:
                    self._client = await _open_client(self._factory, owned)
                except BaseException:
                    await owned.aclose()
                    raise
                self._owned = owned
                self._limiter = anyio.CapacityLimiter(self._concurrency)
        assert self._limiter is not None
        return self._client, self._limiter

    async def aclose(self) -> None:
        """Close what the factory built (idempotent); on the loop the client was built in."""
        owned, self._owned = self._owned, None
        self._client = None
        if owned is None:
            return
        with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True) as scope:
            await owned.aclose()
        if scope.cancelled_caught:
            _log.warning("the actor's clients did not close within %s s", _CLOSE_TIMEOUT)

    def __del__(self) -> None:
        # Ray Data's only teardown hook for a callable-class UDF: on a graceful actor exit,
        # `_MapWorker.__ray_shutdown__` drops the UDF, whose `__del__` runs in the actor's main
        # thread while the UDF event loop still runs in its own thread. Close there.
        loop = self._loop
        if self._owned is None or loop is None or loop.is_closed() or not loop.is_running():
            return
        future = asyncio.run_coroutine_threadsafe(self.aclose(), loop)
        if self._loop_thread == threading.get_ident():
            return  # collected on the loop's own thread: it closes once this returns
        try:
            future.result(timeout=_CLOSE_TIMEOUT + 1)
        except Exception as exc:  # a destructor must not raise; say what went wrong
            _log.warning("closing the actor's clients failed: %s: %s", type(exc).__name__, exc)

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


async def _open_client(factory: ClientFactory, owned: contextlib.AsyncExitStack) -> ChatClient:
    """Call the factory; register on `owned` what closes the client it built."""
    made: Any = factory()
    if isinstance(made, AbstractAsyncContextManager):
        client = await owned.enter_async_context(made)  # the factory closes what it opened
    else:
        client = await made if inspect.isawaitable(made) else made
        if isinstance(client, ChatClient):
            for resource in reversed(_owned_resources(client)):
                owned.push_async_callback(resource.aclose)
    if not isinstance(client, ChatClient):
        raise UserError(
            f"client_factory returned {type(client).__name__}; return a ChatClient (or an async "
            "context manager yielding one)"
        )
    return client


def _owned_resources(client: ChatClient) -> list[ChatModel | JudgeClient]:
    """The models and Jev clients a factory-built `client` reaches, each once, outermost first.

    The client's model, then per advisor its judge's client (`SelfRefineAdvisor.judge.client`)
    or its own (`GuardrailAdvisor.client`), following a `ModelJudgeClient` to its chat model and
    a `JevChatModel` to its Jev client.
    """
    found: dict[int, ChatModel | JudgeClient] = {}
    pending: list[tuple[object, int]] = [(client.model, 0)]
    pending += [(advisor, 0) for advisor in client.advisors]
    while pending:
        node, depth = pending.pop(0)
        if node is None or id(node) in found or depth > 4:
            continue
        if isinstance(node, ChatModel | JudgeClient):
            found[id(node)] = node
        for link in ("judge", "client", "chat_model"):
            try:
                pending.append((getattr(node, link, None), depth + 1))
            except Exception:  # a property that fails has nothing to close
                continue
    return list(found.values())
