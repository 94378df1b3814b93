"""The self-refine loop the speed and memory benchmarks run: the loop as it shipped.

Those benchmarks measure what the SDK costs per call, so every attempt must do the same work in
every run and every release: each attempt judged, each retry the request the loop was given
(no sampling temperature or seed of its own, an identical request sent as it is). The SDK's
default `RetryStrategy` changed with the dev-slice measurement (retries sampled fresh, repeats
guarded); against a fake server that gives the same answer every time that default would judge
fewer attempts, and the figures would measure the strategy instead of the code.
"""

from __future__ import annotations

from typing import Final

from jevrefine import RetryStrategy

__all__ = ["SHIPPED_LOOP"]

SHIPPED_LOOP: Final = RetryStrategy(
    temperature=None,
    fresh_seeds=False,
    identical="send",
    repeats="judge",
    feedback="appended",
    samples=1,
)
"""Every option spelled out, so the loop stays this one whatever the defaults become."""
