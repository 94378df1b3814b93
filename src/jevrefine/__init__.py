"""jevrefine: an async-first ChatClient and advisor chain for LLM apps that must not ship bad answers.

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
from .client import ChatClient as ChatClient
from .client import PromptSpec as PromptSpec
from .exceptions import EmptyResponseError as EmptyResponseError
from .exceptions import JevrefineError as JevrefineError
from .exceptions import ModelConnectionError as ModelConnectionError
from .exceptions import ModelError as ModelError
from .exceptions import ModelHTTPError as ModelHTTPError
from .exceptions import ModelTimeoutError as ModelTimeoutError
from .exceptions import StreamingNotSupportedError as StreamingNotSupportedError
from .exceptions import StructuredOutputError as StructuredOutputError
from .exceptions import UserError as UserError
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
from .tools import ToolCallback as ToolCallback

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "AssistantMessage",
    "BaseAdvisor",
    "CallAdvisor",
    "CallAdvisorChain",
    "ChatClient",
    "ChatClientRequest",
    "ChatClientResponse",
    "ChatModel",
    "ChatOptions",
    "ChatResponse",
    "ChatResponseMetadata",
    "EmptyResponseError",
    "Generation",
    "JevrefineError",
    "Message",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelTimeoutError",
    "Prompt",
    "PromptSpec",
    "ResponseFormat",
    "StreamAdvisor",
    "StreamingNotSupportedError",
    "StructuredOutputError",
    "SystemMessage",
    "TokenLogprob",
    "ToolCall",
    "ToolCallback",
    "ToolDefinition",
    "ToolResponse",
    "ToolResponseMessage",
    "Usage",
    "UserError",
    "UserMessage",
    "__version__",
]
