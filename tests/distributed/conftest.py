"""A local Ray instance for the `ray` tests: no dashboard, no usage report, two CPUs."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def local_ray() -> Iterator[Any]:
    """Start Ray once per session; its usage report must never try to leave the machine."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    if importlib.util.find_spec("ray") is None:
        # Like the local model: a skip (with its reason) on a laptop, a failure under CI=true.
        message = 'the ray tests need Ray: pip install "jevrefine[ray]"'
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    import ray
    import ray.data
    import ray_factories

    # Workers import the factories by value: they need not find the tests folder on sys.path.
    ray.cloudpickle.register_pickle_by_value(ray_factories)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}},
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield ray
    finally:
        ray.shutdown()
