"""Model adapters behind one interface, `ChatModel`.

Vendor adapters live in their own modules, each behind an extra:
`jevrefine.models.openai` (`pip install "jevrefine[openai]"`) and
`jevrefine.models.anthropic` (`pip install "jevrefine[anthropic]"`).
"""

from __future__ import annotations

from .base import ChatModel as ChatModel

__all__ = ["ChatModel"]
