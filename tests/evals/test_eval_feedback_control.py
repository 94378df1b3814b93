"""The eval's no-feedback control and its count of echoes (issue 31 item 3).

Promise: `evaluate(..., strategy=RetryStrategy(feedback="none"))` (the CLI's `--control`) asks
retries without the judge's defects, so comparing it with a normal run shows whether a model
uses the feedback; and a returned answer that passes only by quoting the feedback back is an
`echo`: counted in `echo_passes` and as failed in `final_pass_rate_answered` / `lift_answered`.
"""

from __future__ import annotations

from pathlib import Path

from evals_support import one_case

import jevrefine as jr
from jevrefine import RetryStrategy, evals
from jevrefine.messages import Prompt
from jevrefine.testing import FunctionModel


def _echoing(prompt: Prompt) -> str:
    """First a wrong answer; on a retry, the feedback it was given, word for word."""
    text = prompt.messages[-1].text
    if "broke these rules" in text:
        return text.split("broke these rules:\n", 1)[1].split("\n", 1)[0]
    return "Milan is lovely."


async def test_an_answer_that_quotes_the_feedback_is_an_echo_counted_as_failed(
    tmp_path: Path,
) -> None:
    case = one_case(tmp_path, {"type": "contains", "value": "the capital of Italy is Rome"})
    model = FunctionModel(_echoing)
    judged_like_any = RetryStrategy(repeats="judge")  # an echo may be returned: count it
    report = await evals.evaluate(
        [case], jr.ChatClient(model), max_repeat_attempts=1, strategy=judged_like_any
    )
    data = report.to_dict()
    (row,) = data["results"]
    assert row["passed_final"]  # the oracle's check of the form is fooled...
    assert row["attempts"][1]["echo"]
    assert not row["passed_final_answered"]  # ...the count with echoes failing is not
    assert data["echo_passes"] == 1
    assert data["final_pass_rate"] == 1.0
    assert data["final_pass_rate_answered"] == 0.0
    assert data["lift_answered"] == 0.0


async def test_by_default_an_echo_is_never_returned(tmp_path: Path) -> None:
    case = one_case(tmp_path, {"type": "contains", "value": "the capital of Italy is Rome"})
    report = await evals.evaluate(
        [case], jr.ChatClient(FunctionModel(_echoing)), max_repeat_attempts=1
    )
    data = report.to_dict()
    (row,) = data["results"]
    assert row["attempts"][1]["echo"]
    assert not row["passed_final"]  # the guard returned the real (failing) answer instead
    assert (data["echo_passes"], data["final_pass_rate"]) == (0, 0.0)


async def test_the_control_asks_retries_without_the_defects(tmp_path: Path) -> None:
    case = one_case(tmp_path, {"type": "contains", "value": "Rome"})
    model = FunctionModel(lambda prompt: "Milan is lovely.")
    control = RetryStrategy(feedback="none", temperature=0.7, fresh_seeds=True)
    report = await evals.evaluate(
        [case], jr.ChatClient(model), max_repeat_attempts=1, strategy=control
    )
    first, retry = (p.messages[-1].text for p in model.prompts)
    assert retry == first  # the request again, no defect appended
    assert model.prompts[1].options.temperature == 0.7
    assert report.to_dict()["echo_passes"] == 0
