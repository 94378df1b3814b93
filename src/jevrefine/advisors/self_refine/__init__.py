"""`SelfRefineAdvisor`: judge every answer; when it falls short, say why and ask again.

```python
judge = Judge(JudgeClient(), criteria=[noul("is_grounded", Noul("...", when_false="..."), 0.7)])
client = ChatClient(model, tools=[weather],
                    advisors=[SelfRefineAdvisor(judge, max_repeat_attempts=3)])
response = await client.prompt("What is the weather in Paris?").call()
report = RefineReport.of(response)      # attempts, outcome, usage
```

Each attempt calls the rest of the chain once and judges the answer. A failed verdict's feedback
is appended to the **original** request's last user message for the next attempt, so feedback
never compounds. When attempts run out the best attempt is returned (most criteria passed net of
failed, the later one on a tie), or `SelfRefineFailedError` is raised. Under `entity(T)` an
answer that is not a valid `T` fails too, with the validation error as its feedback. How retries
are asked for (their temperature and seeds, an identical retry, repeats and echoes, where the
feedback goes, best-of-N) is a `RetryStrategy`. Where the advisor sits decides what the judge
sees and what a retry re-runs: see `SelfRefineAdvisor.DEFAULT_ORDER` and
`SelfRefineAdvisor.BEFORE_TOOLS_ORDER`.

The package's rooms: `_advisor` (the advisor: its settings), `_engine` (the one attempt engine
that `call()` runs to the end and `stream()` forwards), `_stream` (steps into chunks and events),
`_strategy` (`RetryStrategy`, the feedback templates), `_output` (an answer that does not fit
`entity(T)`'s type fails), `_report` (attempts, outcomes, the
report), `_input` (what the judge reads of a request, the retry prompt), `_telemetry` (spans
and evaluation events).
"""

from __future__ import annotations

from ._advisor import DEFAULT_STRATEGY as DEFAULT_STRATEGY
from ._advisor import JudgeErrorPolicy as JudgeErrorPolicy
from ._advisor import SelfRefineAdvisor as SelfRefineAdvisor
from ._advisor import SkipPredicate as SkipPredicate
from ._advisor import default_skip_evaluation as default_skip_evaluation
from ._output import OUTPUT_CRITERION as OUTPUT_CRITERION
from ._output import output_defect as output_defect
from ._report import Attempt as Attempt
from ._report import Outcome as Outcome
from ._report import RefineReport as RefineReport
from ._report import SelfRefineFailedError as SelfRefineFailedError
from ._strategy import DEFAULT_FEEDBACK_TEMPLATE as DEFAULT_FEEDBACK_TEMPLATE
from ._strategy import WITH_ANSWER_FEEDBACK_TEMPLATE as WITH_ANSWER_FEEDBACK_TEMPLATE
from ._strategy import RetryStrategy as RetryStrategy
from ._strategy import quotes_feedback as quotes_feedback

__all__ = [
    "DEFAULT_FEEDBACK_TEMPLATE",
    "DEFAULT_STRATEGY",
    "OUTPUT_CRITERION",
    "WITH_ANSWER_FEEDBACK_TEMPLATE",
    "Attempt",
    "JudgeErrorPolicy",
    "Outcome",
    "RefineReport",
    "RetryStrategy",
    "SelfRefineAdvisor",
    "SelfRefineFailedError",
    "SkipPredicate",
    "default_skip_evaluation",
    "output_defect",
    "quotes_feedback",
]
