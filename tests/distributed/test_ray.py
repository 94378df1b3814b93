"""`jevrefine.ray.refine_dataset` end to end on a local Ray instance and the fake OpenAI server."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import ray_factories

from jevrefine import UserError
from jevrefine.testing import FakeJevServer, FakeOpenAIServer

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    # Ray's own modules warn about their own deprecated settings; ours must stay clean.
    pytest.mark.filterwarnings(r"ignore::DeprecationWarning:ray\."),
]


async def test_refine_dataset_end_to_end(local_ray: Any) -> None:
    from jevrefine.ray import RESULT_COLUMNS, refine_dataset

    prompts = [f"question {i}" for i in range(40)] + ["please explode"]
    async with FakeOpenAIServer(latency=0.02) as server:
        dataset = local_ray.data.from_items([{"id": i, "prompt": p} for i, p in enumerate(prompts)])
        refined = refine_dataset(
            dataset,
            functools.partial(ray_factories.openai_client, server.base_url),
            num_actors=2,
            concurrency_per_actor=4,
            batch_size=8,
            num_cpus=0.5,
        )
        # Ray blocks: run it on a thread so this loop (and the fake server) stay responsive.
        rows = await anyio.to_thread.run_sync(refined.take_all)
    rows.sort(key=lambda row: row["id"])
    assert len(rows) == len(prompts)
    assert set(RESULT_COLUMNS) <= set(rows[0])
    for row in rows[:-1]:
        assert row["answer"] == f"Echo: {row['prompt']}"
        assert row["error"] is None
        assert row["attempts"] == 1
        assert row["tokens"] > 0
    failed = rows[-1]
    assert failed["answer"] is None
    assert failed["error"] == "ValueError: asked to explode"
    assert failed["attempts"] == 0
    # Every row but the failed one reached the server, once.
    assert len(server.chat_requests) == len(prompts) - 1


def test_bad_arguments_fail_before_scheduling(local_ray: Any) -> None:
    from jevrefine.ray import refine_dataset

    dataset = local_ray.data.from_items([{"text": "a"}])
    with pytest.raises(UserError, match="no column 'prompt'"):
        refine_dataset(dataset.materialize(), ray_factories.openai_client)
    with pytest.raises(UserError, match="concurrency_per_actor"):
        refine_dataset(dataset, ray_factories.openai_client, concurrency_per_actor=0)
    with pytest.raises(UserError, match="callable"):
        refine_dataset(dataset, "not a factory")  # type: ignore[arg-type]


def markers_of(folder: Path, prefix: str) -> set[str]:
    """The worker pids that left a `prefix-<pid>` marker."""
    return {p.name.rsplit("-", 1)[1] for p in folder.glob(f"{prefix}-*")}


async def wait_for_markers(folder: Path, prefix: str, pids: set[str]) -> set[str]:
    # Ray retires the actors after the operator finishes, asynchronously: give it time.
    deadline = time.monotonic() + 60
    for _ in range(600):
        if markers_of(folder, prefix) == pids or time.monotonic() > deadline:
            break
        await anyio.sleep(0.2)
    return markers_of(folder, prefix)


async def test_actors_close_the_clients_the_factory_built(local_ray: Any, tmp_path: Path) -> None:
    from jevrefine.ray import refine_dataset

    async with FakeOpenAIServer() as server, FakeJevServer() as jev:
        dataset = local_ray.data.from_items([{"prompt": f"question {i}"} for i in range(12)])
        factory = functools.partial(
            ray_factories.judged_client, server.base_url, jev.base_url, str(tmp_path)
        )
        refined = refine_dataset(dataset, factory, num_actors=2, batch_size=3, num_cpus=0.5)
        rows = await anyio.to_thread.run_sync(refined.take_all)
        assert all(row["error"] is None and row["passed"] for row in rows)
        built = markers_of(tmp_path, "built")
        assert built  # one marker per actor that built a client
        # Each actor closed its model and its judge's Jev client once it was retired.
        assert await wait_for_markers(tmp_path, "model-closed", built) == built
        assert await wait_for_markers(tmp_path, "judge-closed", built) == built


async def test_a_context_manager_factory_is_exited(local_ray: Any, tmp_path: Path) -> None:
    from jevrefine.ray import refine_dataset

    async with FakeOpenAIServer() as server:
        dataset = local_ray.data.from_items([{"prompt": f"question {i}"} for i in range(4)])
        factory = functools.partial(ray_factories.context_client, server.base_url, str(tmp_path))
        refined = refine_dataset(dataset, factory, num_actors=1, num_cpus=0.5)
        rows = await anyio.to_thread.run_sync(refined.take_all)
        assert [row["answer"] for row in sorted(rows, key=lambda r: r["prompt"])] == [
            f"Echo: question {i}" for i in range(4)
        ]
        entered = markers_of(tmp_path, "entered")
        assert len(entered) == 1
        assert await wait_for_markers(tmp_path, "exited", entered) == entered


async def test_owned_resources_follow_the_advisors() -> None:
    from jevrefine.advisors.self_refine import SelfRefineAdvisor
    from jevrefine.jev import Noul
    from jevrefine.judge import ModelJudgeClient
    from jevrefine.judge._judge import Judge
    from jevrefine.judge.criteria import noul
    from jevrefine.ray import _owned_resources
    from jevrefine.testing import FunctionModel

    answering = FunctionModel(lambda prompt: "an answer")
    judging = FunctionModel(lambda prompt: "yes")
    judge = Judge(ModelJudgeClient(judging), [noul("ok", Noul("Is it ok?"))])
    client = jr_client(answering, SelfRefineAdvisor(judge))
    assert _owned_resources(client) == [answering, judging]
    # The same model judging and answering is closed once.
    shared = Judge(ModelJudgeClient(answering), [noul("ok", Noul("Is it ok?"))])
    assert _owned_resources(jr_client(answering, SelfRefineAdvisor(shared))) == [answering]


def jr_client(model: Any, *advisors: Any) -> Any:
    from jevrefine import ChatClient

    return ChatClient(model, advisors=advisors)
