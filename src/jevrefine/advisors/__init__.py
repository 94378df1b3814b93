"""Advisors: middleware around the model call, ordered by `order`."""

from __future__ import annotations

from .chain import HIGHEST_PRECEDENCE as HIGHEST_PRECEDENCE
from .chain import LOWEST_PRECEDENCE as LOWEST_PRECEDENCE
from .chain import BaseAdvisor as BaseAdvisor
from .chain import CallAdvisor as CallAdvisor
from .chain import CallAdvisorChain as CallAdvisorChain
from .chain import StreamAdvisor as StreamAdvisor

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "BaseAdvisor",
    "CallAdvisor",
    "CallAdvisorChain",
    "StreamAdvisor",
]
