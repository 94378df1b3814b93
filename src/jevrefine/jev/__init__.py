"""The Jev side: typed questions, the System One clients, and their answers.

```python
from jevrefine.jev import JudgeClient, Noul, Choice, Score

async with JudgeClient() as jev:                      # TYPESAFE_API_KEY
    response = await jev.system_one(state, {"is_grounded": Noul("Is every claim supported?")})
```

This is the wire side only. `JudgeClient` asks TypeSafe's Jev System One API; any
`SystemOneClient` (also `jevrefine.judge.ModelJudgeClient`, which answers the same questions with a
chat model) takes typed `Noul`/`Choice`/`Score` questions and returns a `SystemOneResponse`;
`system_one_all` batches calls on any of them. Judging an answer against criteria (`Judge`,
`noul`/`score`/`choice`/`check`, `Verdict`) lives in `jevrefine.judge`.
"""

from __future__ import annotations

from .batch import BatchResult as BatchResult
from .batch import SystemOneRequest as SystemOneRequest
from .batch import system_one_all as system_one_all
from .client import JudgeClient as JudgeClient
from .errors import AnswerNotFoundError as AnswerNotFoundError
from .errors import JudgeAPIError as JudgeAPIError
from .errors import JudgeAuthenticationError as JudgeAuthenticationError
from .errors import JudgeBadRequestError as JudgeBadRequestError
from .errors import JudgeConnectionError as JudgeConnectionError
from .errors import JudgeError as JudgeError
from .errors import JudgeNotFoundError as JudgeNotFoundError
from .errors import JudgeOverloadedError as JudgeOverloadedError
from .errors import JudgePermissionDeniedError as JudgePermissionDeniedError
from .errors import JudgeRateLimitError as JudgeRateLimitError
from .errors import JudgeRequestTimeoutError as JudgeRequestTimeoutError
from .errors import JudgeRequestTooLargeError as JudgeRequestTooLargeError
from .errors import JudgeResponseError as JudgeResponseError
from .errors import JudgeResponseTooLargeError as JudgeResponseTooLargeError
from .errors import JudgeServerError as JudgeServerError
from .errors import JudgeTimeoutError as JudgeTimeoutError
from .errors import JudgeUsageError as JudgeUsageError
from .errors import JudgeValidationError as JudgeValidationError
from .protocol import SystemOneClient as SystemOneClient
from .questions import Choice as Choice
from .questions import Content as Content
from .questions import Noul as Noul
from .questions import Question as Question
from .questions import Score as Score
from .questions import State as State
from .responses import Answer as Answer
from .responses import ChoiceAnswer as ChoiceAnswer
from .responses import ModelInfo as ModelInfo
from .responses import NoulAnswer as NoulAnswer
from .responses import ScoreAnswer as ScoreAnswer
from .responses import SystemOneResponse as SystemOneResponse
from .responses import UnknownAnswerWarning as UnknownAnswerWarning
from .retry import RetryPolicy as RetryPolicy

__all__ = [
    "Answer",
    "AnswerNotFoundError",
    "BatchResult",
    "Choice",
    "ChoiceAnswer",
    "Content",
    "JudgeAPIError",
    "JudgeAuthenticationError",
    "JudgeBadRequestError",
    "JudgeClient",
    "JudgeConnectionError",
    "JudgeError",
    "JudgeNotFoundError",
    "JudgeOverloadedError",
    "JudgePermissionDeniedError",
    "JudgeRateLimitError",
    "JudgeRequestTimeoutError",
    "JudgeRequestTooLargeError",
    "JudgeResponseError",
    "JudgeResponseTooLargeError",
    "JudgeServerError",
    "JudgeTimeoutError",
    "JudgeUsageError",
    "JudgeValidationError",
    "ModelInfo",
    "Noul",
    "NoulAnswer",
    "Question",
    "RetryPolicy",
    "Score",
    "ScoreAnswer",
    "State",
    "SystemOneClient",
    "SystemOneRequest",
    "SystemOneResponse",
    "UnknownAnswerWarning",
    "system_one_all",
]
