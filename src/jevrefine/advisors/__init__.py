"""Advisors: middleware around the model call, ordered by `order`."""

from __future__ import annotations

from .chain import HIGHEST_PRECEDENCE as HIGHEST_PRECEDENCE
from .chain import LOWEST_PRECEDENCE as LOWEST_PRECEDENCE
from .chain import BaseAdvisor as BaseAdvisor
from .chain import CallAdvisor as CallAdvisor
from .chain import CallAdvisorChain as CallAdvisorChain
from .chain import StreamAdvisor as StreamAdvisor
from .guardrail import GuardrailAdvisor as GuardrailAdvisor
from .guardrail import GuardrailOutcome as GuardrailOutcome
from .guardrail import GuardrailVerdict as GuardrailVerdict
from .guardrail import Hazard as Hazard
from .logging_advisor import LOGGING_ORDER as LOGGING_ORDER
from .logging_advisor import LoggingAdvisor as LoggingAdvisor
from .memory import MEMORY_ORDER as MEMORY_ORDER
from .memory import MessageChatMemoryAdvisor as MessageChatMemoryAdvisor
from .retrieval import DEFAULT_RETRIEVAL_TEMPLATE as DEFAULT_RETRIEVAL_TEMPLATE
from .retrieval import RetrievalAdvisor as RetrievalAdvisor
from .self_refine import Attempt as Attempt
from .self_refine import JudgeErrorPolicy as JudgeErrorPolicy
from .self_refine import RefineReport as RefineReport
from .self_refine import RetryStrategy as RetryStrategy
from .self_refine import SelfRefineAdvisor as SelfRefineAdvisor
from .self_refine import SelfRefineFailedError as SelfRefineFailedError
from .tool_calling import TOOL_CALLING_ORDER as TOOL_CALLING_ORDER
from .tool_calling import ToolCallingAdvisor as ToolCallingAdvisor
from .tool_index import TOOL_INDEX_ORDER as TOOL_INDEX_ORDER
from .tool_index import ToolIndex as ToolIndex

__all__ = [
    "DEFAULT_RETRIEVAL_TEMPLATE",
    "HIGHEST_PRECEDENCE",
    "LOGGING_ORDER",
    "LOWEST_PRECEDENCE",
    "MEMORY_ORDER",
    "TOOL_CALLING_ORDER",
    "TOOL_INDEX_ORDER",
    "Attempt",
    "BaseAdvisor",
    "CallAdvisor",
    "CallAdvisorChain",
    "GuardrailAdvisor",
    "GuardrailOutcome",
    "GuardrailVerdict",
    "Hazard",
    "JudgeErrorPolicy",
    "LoggingAdvisor",
    "MessageChatMemoryAdvisor",
    "RefineReport",
    "RetrievalAdvisor",
    "RetryStrategy",
    "SelfRefineAdvisor",
    "SelfRefineFailedError",
    "StreamAdvisor",
    "ToolCallingAdvisor",
    "ToolIndex",
]
