"""The attribute, metric and event names jevrefine emits, and which convention version names them.

The names are our own constants: the released `opentelemetry-semantic-conventions` package marks
its `gen_ai` constants as moved to a repository with no release yet, so depending on it for names
would tie every user to a deprecated module. The conformance tests read the same names from that
package (tests/telemetry/test_names.py), so the two cannot drift apart unnoticed.

`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` (OpenTelemetry's own switch) selects
the newest names from `semantic-conventions-genai` `main` where they differ; see `MetricNames`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

# Attributes (OpenTelemetry GenAI semantic conventions, development status).
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_SYSTEM: Final = "gen_ai.system"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_OUTPUT_TYPE: Final = "gen_ai.output.type"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_TOTAL_TOKENS: Final = "gen_ai.usage.total_tokens"
"""Seed 004's older attribute (input + output); emitted only with `legacy_attributes=True`."""
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_WORKFLOW_NAME: Final = "gen_ai.workflow.name"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"

# Metrics.
METRIC_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
METRIC_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai.client.operation.time_per_output_chunk"
METRIC_TOOL_DURATION: Final = "gen_ai.execute_tool.duration"
METRIC_WORKFLOW_DURATION: Final = "gen_ai.workflow.duration"
METRIC_REFINE_OUTCOME: Final = "jevrefine.refine.outcome"
METRIC_REFINE_ATTEMPTS: Final = "jevrefine.refine.attempts"
REFINE_OUTCOME: Final = "jevrefine.refine.outcome"

# Events.
INFERENCE_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"

# Operations.
CHAT: Final = "chat"
SYSTEM_ONE: Final = "system_one"
"""The operation of a Jev call (`JudgeClient.system_one`): a classification, not a chat.

The conventions let a system name its own operation when no predefined one fits; Jev answers
typed questions with probabilities and generates no text, so `chat` (with a finish reason it
never sends) would mislead dashboards that count chat completions.
"""

STABILITY_OPT_IN_ENV: Final = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST_EXPERIMENTAL: Final = "gen_ai_latest_experimental"


@dataclass(frozen=True, slots=True)
class MetricNames:
    """The names of the metrics whose name depends on the convention version."""

    inference_duration: str
    """Duration of inference calls (`chat`, `system_one`)."""
    time_to_first_chunk: str
    """Time from the request to the first streamed chunk."""
    time_per_output_chunk: str
    """Time between streamed chunks after the first."""
    token_usage: str
    """Token counts (one histogram, split by `gen_ai.token.type`), in the released names."""
    input_tokens: str | None
    """The newest conventions' separate input-token histogram (`None`: use `token_usage`)."""
    output_tokens: str | None
    """The newest conventions' separate output-token histogram (`None`: use `token_usage`)."""


RELEASED_NAMES: Final = MetricNames(
    inference_duration=METRIC_OPERATION_DURATION,
    time_to_first_chunk=METRIC_TIME_TO_FIRST_CHUNK,
    time_per_output_chunk=METRIC_TIME_PER_OUTPUT_CHUNK,
    token_usage=METRIC_TOKEN_USAGE,
    input_tokens=None,
    output_tokens=None,
)
"""What the released `opentelemetry-semantic-conventions` package names (the default)."""

LATEST_NAMES: Final = MetricNames(
    inference_duration="gen_ai.client.inference.duration",
    time_to_first_chunk="gen_ai.client.inference.time_to_first_chunk",
    time_per_output_chunk="gen_ai.client.inference.time_per_output_chunk",
    token_usage=METRIC_TOKEN_USAGE,
    input_tokens="gen_ai.client.inference.usage.input_tokens",
    output_tokens="gen_ai.client.inference.usage.output_tokens",
)
"""`semantic-conventions-genai` `main` (#521 inference duration, #374 usage histograms)."""


def metric_names_from_env() -> MetricNames:
    """The names `OTEL_SEMCONV_STABILITY_OPT_IN` (a comma-separated list) asks for."""
    wanted = {part.strip() for part in os.environ.get(STABILITY_OPT_IN_ENV, "").split(",")}
    return LATEST_NAMES if LATEST_EXPERIMENTAL in wanted else RELEASED_NAMES
