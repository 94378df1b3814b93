"""jevrefine: an async-first ChatClient and advisor chain for LLM apps.

For apps that must not ship bad answers.

```python
import jevrefine as jr
from jevrefine.models.openai import OpenAIChatModel

client = jr.ChatClient(OpenAIChatModel("gpt-4o-mini"), system="Answer in one sentence.")
answer = await client.prompt("What is the capital of France?").content()
```
"""

from __future__ import annotations

from ._request import ChatClientRequest as ChatClientRequest
from ._request import ChatClientResponse as ChatClientResponse
from ._version import __version__ as __version__
from .advisors.chain import HIGHEST_PRECEDENCE as HIGHEST_PRECEDENCE
from .advisors.chain import LOWEST_PRECEDENCE as LOWEST_PRECEDENCE
from .advisors.chain import BaseAdvisor as BaseAdvisor
from .advisors.chain import CallAdvisor as CallAdvisor
from .advisors.chain import CallAdvisorChain as CallAdvisorChain
from .advisors.chain import StreamAdvisor as StreamAdvisor
from .advisors.guardrail import GuardrailAdvisor as GuardrailAdvisor
from .advisors.guardrail import GuardrailOutcome as GuardrailOutcome
from .advisors.guardrail import Hazard as Hazard
from .advisors.logging_advisor import LoggingAdvisor as LoggingAdvisor
from .advisors.memory import MessageChatMemoryAdvisor as MessageChatMemoryAdvisor
from .advisors.retrieval import RetrievalAdvisor as RetrievalAdvisor
from .advisors.self_refine import Attempt as Attempt
from .advisors.self_refine import JudgeErrorPolicy as JudgeErrorPolicy
from .advisors.self_refine import RefineReport as RefineReport
from .advisors.self_refine import RetryStrategy as RetryStrategy
from .advisors.self_refine import SelfRefineAdvisor as SelfRefineAdvisor
from .advisors.self_refine import SelfRefineFailedError as SelfRefineFailedError
from .advisors.tool_calling import ToolCallingAdvisor as ToolCallingAdvisor
from .batch import RefineSummary as RefineSummary
from .batch import refine_iter as refine_iter
from .batch import refine_many as refine_many
from .client import ChatClient as ChatClient
from .client import PromptSpec as PromptSpec
from .exceptions import EmptyResponseError as EmptyResponseError
from .exceptions import IncompleteResponseError as IncompleteResponseError
from .exceptions import JevrefineError as JevrefineError
from .exceptions import ModelConnectionError as ModelConnectionError
from .exceptions import ModelError as ModelError
from .exceptions import ModelHTTPError as ModelHTTPError
from .exceptions import ModelResponseError as ModelResponseError
from .exceptions import ModelTimeoutError as ModelTimeoutError
from .exceptions import ResponseTooLargeError as ResponseTooLargeError
from .exceptions import StreamingNotSupportedError as StreamingNotSupportedError
from .exceptions import StructuredOutputError as StructuredOutputError
from .exceptions import UserError as UserError
from .memory import ChatMemory as ChatMemory
from .memory import InMemoryChatMemory as InMemoryChatMemory
from .memory import SqliteChatMemory as SqliteChatMemory
from .messages import AssistantMessage as AssistantMessage
from .messages import ChatOptions as ChatOptions
from .messages import ChatResponse as ChatResponse
from .messages import ChatResponseMetadata as ChatResponseMetadata
from .messages import Generation as Generation
from .messages import Message as Message
from .messages import Prompt as Prompt
from .messages import ResponseFormat as ResponseFormat
from .messages import SystemMessage as SystemMessage
from .messages import TokenLogprob as TokenLogprob
from .messages import ToolCall as ToolCall
from .messages import ToolDefinition as ToolDefinition
from .messages import ToolResponse as ToolResponse
from .messages import ToolResponseMessage as ToolResponseMessage
from .messages import Usage as Usage
from .messages import UserMessage as UserMessage
from .models.base import ChatModel as ChatModel
from .rate_limit import RateLimit as RateLimit
from .rate_limit import RateLimiter as RateLimiter
from .rate_limit import RateLimitTimeoutError as RateLimitTimeoutError
from .retrieval import Document as Document
from .retrieval import Retriever as Retriever
from .retrieval import SqliteFtsRetriever as SqliteFtsRetriever
from .tools import FunctionTool as FunctionTool
from .tools import RecordingToolCallback as RecordingToolCallback
from .tools import ToolArgumentsError as ToolArgumentsError
from .tools import ToolCallback as ToolCallback
from .tools import ToolCallRecord as ToolCallRecord
from .tools import ToolError as ToolError
from .tools import ToolRoundsExceededError as ToolRoundsExceededError
from .tools import ToolTimeoutError as ToolTimeoutError
from .tools import UnknownToolError as UnknownToolError
from .tools import record_tool_calls as record_tool_calls
from .tools import tool as tool

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "AssistantMessage",
    "Attempt",
    "BaseAdvisor",
    "CallAdvisor",
    "CallAdvisorChain",
    "ChatClient",
    "ChatClientRequest",
    "ChatClientResponse",
    "ChatMemory",
    "ChatModel",
    "ChatOptions",
    "ChatResponse",
    "ChatResponseMetadata",
    "Document",
    "EmptyResponseError",
    "FunctionTool",
    "Generation",
    "GuardrailAdvisor",
    "GuardrailOutcome",
    "Hazard",
    "InMemoryChatMemory",
    "IncompleteResponseError",
    "JevrefineError",
    "JudgeErrorPolicy",
    "LoggingAdvisor",
    "Message",
    "MessageChatMemoryAdvisor",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelTimeoutError",
    "Prompt",
    "PromptSpec",
    "RateLimit",
    "RateLimitTimeoutError",
    "RateLimiter",
    "RecordingToolCallback",
    "RefineReport",
    "RefineSummary",
    "ResponseFormat",
    "ResponseTooLargeError",
    "RetrievalAdvisor",
    "Retriever",
    "RetryStrategy",
    "SelfRefineAdvisor",
    "SelfRefineFailedError",
    "SqliteChatMemory",
    "SqliteFtsRetriever",
    "StreamAdvisor",
    "StreamingNotSupportedError",
    "StructuredOutputError",
    "SystemMessage",
    "TokenLogprob",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallRecord",
    "ToolCallback",
    "ToolCallingAdvisor",
    "ToolDefinition",
    "ToolError",
    "ToolResponse",
    "ToolResponseMessage",
    "ToolRoundsExceededError",
    "ToolTimeoutError",
    "UnknownToolError",
    "Usage",
    "UserError",
    "UserMessage",
    "__version__",
    "record_tool_calls",
    "refine_iter",
    "refine_many",
    "tool",
]
