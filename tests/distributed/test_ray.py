"""`jevrefine.ray.refine_dataset` end to end on a local Ray instance and the fake OpenAI server."""

from __future__ import annotations

import functools
from typing import Any

import anyio
import pytest
import ray_factories

from jevrefine import UserError
from jevrefine.testing import FakeOpenAIServer

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
