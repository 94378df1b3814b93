"""`RetryStrategy`: how retries are asked for, and what counts as an answer.

Each option against a `FunctionModel` that records every prompt it was sent (its options
included) and a judge of code checks only (no judging call), plus a `FakeJevServer` judge where
judging calls are counted.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import jevrefine as jr
from jevrefine import RetryStrategy, SelfRefineAdvisor
from jevrefine.exceptions import UserError
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import Judge, JudgeInput, ModelJudgeClient, check, noul
from jevrefine.messages import ChatOptions, Prompt
from jevrefine.testing import FakeJevServer, FunctionModel


def _checked(predicate: Callable[[str], bool], defect: str = "Say the word 'blue'.") -> Judge:
    """A judge of one code check on the answer (no client is ever called)."""

    def holds(judge_input: JudgeInput) -> bool:
        return predicate(judge_input.assistant_answer)

    # The client answers nothing: a judge of code checks only makes no judging call.
    never = ModelJudgeClient(FunctionModel(lambda p: pytest.fail("the judge was called")))
    return Judge(never, [check("says_blue", holds, defect)])


async def _refine(
    answers: Callable[[Prompt], str],
    judge: Judge,
    strategy: RetryStrategy,
    *,
    attempts: int = 2,
    options: ChatOptions | None = None,
) -> tuple[jr.RefineReport, FunctionModel]:
    model = FunctionModel(answers)
    advisor = SelfRefineAdvisor(judge, max_repeat_attempts=attempts, strategy=strategy)
    client = jr.ChatClient(model, advisors=[advisor])
    spec = client.prompt("What colour is the sky?")
    if options is not None:
        spec = spec.options(options)
    response = await spec.call()
    report = jr.RefineReport.of(response)
    assert report is not None
    return report, model


async def test_the_default_samples_retries_afresh_and_guards_repeats() -> None:
    """The measured defaults: retries at 0.7 with their own seeds, a repeat keeps its verdict."""
    report, model = await _refine(
        lambda p: "grey",
        _checked(lambda a: "blue" in a),
        RetryStrategy(),
        options=ChatOptions(temperature=0.0, seed=7),
    )
    sent = [(p.options.temperature, p.options.seed) for p in model.prompts]
    assert sent == [(0.0, 7), (0.7, 8), (0.7, 9)]
    assert [a.repeat_of for a in report.attempts] == [None, 1, 1]


async def test_the_loop_as_it_shipped_is_one_strategy_away() -> None:
    shipped = RetryStrategy(temperature=None, fresh_seeds=False, identical="send", repeats="judge")
    report, model = await _refine(lambda p: "grey", _checked(lambda a: "blue" in a), shipped)
    options = [p.options for p in model.prompts]
    assert options[0] == options[1] == options[2]  # every retry asked as the request was
    assert [a.repeat_of for a in report.attempts] == [None, None, None]


async def test_retries_are_sampled_at_their_temperature_each_with_a_fresh_seed() -> None:
    strategy = RetryStrategy(temperature=0.7, fresh_seeds=True)
    _, model = await _refine(
        lambda p: "grey",
        _checked(lambda a: "blue" in a),
        strategy,
        options=ChatOptions(temperature=0.0, seed=7),
    )
    sent = [(p.options.temperature, p.options.seed) for p in model.prompts]
    assert sent == [(0.0, 7), (0.7, 8), (0.7, 9)]


async def test_an_identical_retry_at_temperature_0_is_resampled_with_a_fresh_seed() -> None:
    # Retries at the request's temperature (0): the third would be the second again.
    strategy = RetryStrategy(
        temperature=None, fresh_seeds=False, identical="resample", resample_temperature=0.9
    )
    _, model = await _refine(
        lambda p: "grey",
        _checked(lambda a: "blue" in a),
        strategy,
        options=ChatOptions(temperature=0.0, seed=7),
    )
    # Attempt 2 carries the feedback; attempt 3 would carry the same feedback: same request.
    assert model.prompts[1].messages == model.prompts[2].messages
    assert (model.prompts[1].options.temperature, model.prompts[1].options.seed) == (0.0, 7)
    assert (model.prompts[2].options.temperature, model.prompts[2].options.seed) == (0.9, 9)


async def test_an_identical_retry_is_not_sent_with_stop_and_the_report_says_why() -> None:
    report, model = await _refine(
        lambda p: "grey",
        _checked(lambda a: "blue" in a),
        RetryStrategy(temperature=None, identical="stop"),
        options=ChatOptions(temperature=0.0),
    )
    assert len(model.prompts) == 2  # the third would have repeated the second word for word
    assert report.outcome == "best_attempt"
    assert report.stopped_early is not None
    assert "repeat an earlier request" in report.stopped_early


async def test_a_sampled_request_is_never_called_identical() -> None:
    _, model = await _refine(
        lambda p: "grey",
        _checked(lambda a: "blue" in a),
        RetryStrategy(identical="stop"),
        options=ChatOptions(temperature=0.8),  # each call is a new sample
    )
    assert len(model.prompts) == 3


async def test_a_repeated_answer_keeps_its_verdict_without_a_judging_call() -> None:
    async with (
        FakeJevServer(lambda state, questions: {"ok": 0.1}) as server,
        JudgeClient("k-0123456789", base_url=server.base_url) as client,
    ):
        judge = Judge(client, [noul("ok", Noul("Is it blue?"), 0.5)])
        report, _ = await _refine(lambda p: "grey", judge, RetryStrategy(repeats="guard"))
        assert len(server.requests) == 1  # attempts 2 and 3 repeat attempt 1
    assert [a.repeat_of for a in report.attempts] == [None, 1, 1]
    assert report.attempts[1].verdict is report.attempts[0].verdict
    assert report.judge_usage == report.attempts[0].judge_usage


async def test_an_answer_that_echoes_the_feedback_is_never_a_pass() -> None:
    defect = "Name the colour of the daytime sky in your answer."

    def answers(prompt: Prompt) -> str:
        text = prompt.messages[-1].text
        return defect if "broke these rules" in text else "grey"

    # The check passes anything long enough: the echo would pass it.
    report, _ = await _refine(
        answers, _checked(lambda a: len(a) > 10, defect), RetryStrategy(repeats="guard")
    )
    assert report.attempts[1].echo
    verdict = report.attempts[1].verdict
    assert verdict is not None
    assert verdict.passed
    assert report.outcome == "best_attempt"  # an echo that passes is not an answer
    judged = RetryStrategy(repeats="judge")
    plain, _ = await _refine(answers, _checked(lambda a: len(a) > 10, defect), judged)
    assert plain.outcome == "passed"


async def test_the_feedback_can_quote_the_rejected_answer_or_be_left_out() -> None:
    _, model = await _refine(
        lambda p: "grey", _checked(lambda a: "blue" in a), RetryStrategy(feedback="with_answer")
    )
    retry = model.prompts[1].messages[-1].text
    assert "<<<\ngrey\n>>>" in retry
    assert "Say the word 'blue'." in retry
    _, control = await _refine(
        lambda p: "grey", _checked(lambda a: "blue" in a), RetryStrategy(feedback="none")
    )
    assert control.prompts[1].messages == control.prompts[0].messages  # the request again


async def test_best_of_n_asks_for_samples_at_once_and_keeps_the_best() -> None:
    def answers(prompt: Prompt) -> str:
        return "blue" if prompt.options.seed == 1007 else "grey"  # only the second sample

    report, model = await _refine(
        answers,
        _checked(lambda a: "blue" in a),
        RetryStrategy(samples=3),
        options=ChatOptions(temperature=0.0, seed=7),
    )
    assert report.outcome == "passed"
    assert len(report.attempts) == 1
    assert report.attempts[0].answer == "blue"
    assert sorted(p.options.seed for p in model.prompts) == [7, 1007, 2007]
    assert {p.options.temperature for p in model.prompts[1:]} == {0.7}


def test_bad_options_are_user_errors_naming_them() -> None:
    with pytest.raises(UserError, match="identical"):
        RetryStrategy(identical="maybe")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="samples"):
        RetryStrategy(samples=0)
    with pytest.raises(UserError, match="temperature"):
        RetryStrategy(temperature=-1)
    judge = _checked(lambda a: True)
    with pytest.raises(UserError, match="samples"):
        SelfRefineAdvisor(judge, strategy=RetryStrategy(samples=2), stream_mode="buffered")
