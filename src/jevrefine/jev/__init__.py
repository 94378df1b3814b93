"""The Jev side: typed questions, the System One clients, and their answers.

```python
from jevrefine.jev import JudgeClient, Noul, Choice, Score

async with JudgeClient() as jev:                      # TYPESAFE_API_KEY
    response = await jev.system_one(state, {"is_grounded": Noul("Is every claim supported?")})
```

`JudgeClient` asks TypeSafe's Jev System One API; `ModelJudgeClient` answers the same questions
with any `ChatModel`. Both are `SystemOneClient`s; `system_one_all` batches either. A `Judge` turns
criteria (`noul`, `score`, `choice`, `check`) into a `Verdict` on one answer; `rating_judge` is the
LLM-as-a-judge helpfulness preset.
"""

from __future__ import annotations

from ._explain import JudgeExample as JudgeExample
from .batch import BatchResult as BatchResult
from .batch import SystemOneRequest as SystemOneRequest
from .batch import run_all as run_all
from .batch import system_one_all as system_one_all
from .client import JudgeClient as JudgeClient
from .criteria import CheckCriterion as CheckCriterion
from .criteria import Criterion as Criterion
from .criteria import QuestionCriterion as QuestionCriterion
from .criteria import check as check
from .criteria import choice as choice
from .criteria import noul as noul
from .criteria import score as score
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
from .errors import JudgeServerError as JudgeServerError
from .errors import JudgeTimeoutError as JudgeTimeoutError
from .errors import JudgeUsageError as JudgeUsageError
from .errors import JudgeValidationError as JudgeValidationError
from .judge import Judge as Judge
from .judge import JudgeInput as JudgeInput
from .judge import JudgePlan as JudgePlan
from .judge import rating_judge as rating_judge
from .model_judge import ModelJudgeClient as ModelJudgeClient
from .patterns import ConsistencyReport as ConsistencyReport
from .patterns import PairwiseResult as PairwiseResult
from .patterns import QuestionStats as QuestionStats
from .patterns import consistency as consistency
from .patterns import pairwise as pairwise
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
from .verdict import Finding as Finding
from .verdict import Outcome as Outcome
from .verdict import Verdict as Verdict

__all__ = [
    "Answer",
    "AnswerNotFoundError",
    "BatchResult",
    "CheckCriterion",
    "Choice",
    "ChoiceAnswer",
    "ConsistencyReport",
    "Content",
    "Criterion",
    "Finding",
    "Judge",
    "JudgeAPIError",
    "JudgeAuthenticationError",
    "JudgeBadRequestError",
    "JudgeClient",
    "JudgeConnectionError",
    "JudgeError",
    "JudgeExample",
    "JudgeInput",
    "JudgeNotFoundError",
    "JudgeOverloadedError",
    "JudgePermissionDeniedError",
    "JudgePlan",
    "JudgeRateLimitError",
    "JudgeRequestTimeoutError",
    "JudgeRequestTooLargeError",
    "JudgeResponseError",
    "JudgeServerError",
    "JudgeTimeoutError",
    "JudgeUsageError",
    "JudgeValidationError",
    "ModelInfo",
    "ModelJudgeClient",
    "Noul",
    "NoulAnswer",
    "Outcome",
    "PairwiseResult",
    "Question",
    "QuestionCriterion",
    "QuestionStats",
    "RetryPolicy",
    "Score",
    "ScoreAnswer",
    "State",
    "SystemOneClient",
    "SystemOneRequest",
    "SystemOneResponse",
    "UnknownAnswerWarning",
    "Verdict",
    "check",
    "choice",
    "consistency",
    "noul",
    "pairwise",
    "rating_judge",
    "run_all",
    "score",
    "system_one_all",
]
