"""Names of the keys advisors share through the request/response `context` dict.

The string values are fixed (users and other advisors rely on them); use the constants.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CONVERSATION_ID",
    "GUARDRAIL_OUTCOME",
    "GUARDRAIL_SCREENING_FAILURE",
    "REFINE_REPORT",
    "RETRIEVAL_DOCUMENTS",
    "TOOL_RETURN_DIRECT",
]

CONVERSATION_ID: Final = "conversation_id"
"""The chat-memory conversation, set with `.advisors(conversation_id=...)`."""

TOOL_RETURN_DIRECT: Final = "jevrefine.tool.return_direct"
"""`True` when the response is a return-direct tool result, not the model's answer."""

RETRIEVAL_DOCUMENTS: Final = "jevrefine.retrieval.documents"
"""The documents the retrieval advisor put into the prompt."""

REFINE_REPORT: Final = "jevrefine.refine.report"
"""The self-refine advisor's `RefineReport` (attempts, outcome, usage)."""

GUARDRAIL_OUTCOME: Final = "jev.guardrail.outcome"
"""The outcome name of a guardrail refusal."""

GUARDRAIL_SCREENING_FAILURE: Final = "jev.guardrail.screening_failure"
"""`"input"` or `"output"`: which guardrail screening failed open."""
