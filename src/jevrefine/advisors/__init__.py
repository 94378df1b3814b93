"""Advisors: middleware around the model call, ordered by `order`."""

from __future__ import annotations

from .chain import HIGHEST_PRECEDENCE as HIGHEST_PRECEDENCE
from .chain import LOWEST_PRECEDENCE as LOWEST_PRECEDENCE
from .chain import BaseAdvisor as BaseAdvisor
from .chain import CallAdvisor as CallAdvisor
from .chain import CallAdvisorChain as CallAdvisorChain
from .chain import StreamAdvisor as StreamAdvisor
from .memory import MEMORY_ORDER as MEMORY_ORDER
from .memory import MessageChatMemoryAdvisor as MessageChatMemoryAdvisor
from .tool_calling import TOOL_CALLING_ORDER as TOOL_CALLING_ORDER
from .tool_calling import ToolCallingAdvisor as ToolCallingAdvisor

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "MEMORY_ORDER",
    "TOOL_CALLING_ORDER",
    "BaseAdvisor",
    "CallAdvisor",
    "CallAdvisorChain",
    "MessageChatMemoryAdvisor",
    "StreamAdvisor",
    "ToolCallingAdvisor",
]
