"""SelfRefineAdvisor: the loop itself (seed 000 and semantics §3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import jevrefine as jr
from jevrefine import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    ChatClient,
    JudgeErrorPolicy,
    Prompt,
    RefineReport,
    SelfRefineAdvisor,
    SelfRefineFailedError,
    UserMessage,
    context_keys,
)
from jevrefine.jev import JudgeClient, Noul
from jevrefine.judge import check, noul
from jevrefine.judge._judge import Judge
from jevrefine.testing import FakeJevServer, FunctionModel

IS_CORRECT = Noul("Is `assistant_answer` correct?", when_false="The answer is wrong")


def drafts(*texts: str) -> FunctionModel:
    """A model answering with `texts` in order, the last one repeated."""
    answers = list(texts)

    def answer(prompt: Prompt) -> str:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    return FunctionModel(answer)


def judged_by_answer(verdicts: dict[str, float]) -> Callable[[Any, Any], dict[str, float]]:
    """A FakeJevServer answer: P(yes) for every noul, looked up by the judged answer."""

    def answer(state: Any, questions: dict[str, Any]) -> dict[str, float]:
        value = verdicts[state["assistant_answer"]]
        return dict.fromkeys(questions, value)

    return answer


def report_of(response: jr.ChatClientResponse) -> RefineReport:
    report = response.context[context_keys.REFINE_REPORT]
    assert isinstance(report, RefineReport)
    return report


async def test_constants_and_the_attempt_limit(jev: JudgeClient) -> None:
    assert SelfRefineAdvisor.DEFAULT_ORDER == LOWEST_PRECEDENCE - 2000
    assert SelfRefineAdvisor.BEFORE_TOOLS_ORDER == HIGHEST_PRECEDENCE + 250
    assert SelfRefineAdvisor.MAX_REPEAT_ATTEMPTS_LIMIT == 100
    judge = Judge(jev, [noul("ok", IS_CORRECT)])
    advisor = SelfRefineAdvisor(judge)
    assert advisor.max_repeat_attempts == 3
    assert advisor.order == SelfRefineAdvisor.DEFAULT_ORDER
    assert advisor.judge_error_policy is JudgeErrorPolicy.FAIL_OPEN
    assert not advisor.fail_on_exhausted_attempts
    assert SelfRefineAdvisor(judge, max_repeat_attempts=100).max_repeat_attempts == 100
    for bad in (0, 101, -1, True, 2.0):
        with pytest.raises(ValueError, match="from 1 to 100"):
            SelfRefineAdvisor(judge, max_repeat_attempts=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="feedback"):
        SelfRefineAdvisor(judge, feedback_template="no placeholder")


async def test_a_passing_first_answer_is_returned_after_one_judging_call(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = judged_by_answer({"Paris.": 0.95})
    model = drafts("Paris.")
    client = ChatClient(model, advisors=[SelfRefineAdvisor(Judge(jev, [noul("ok", IS_CORRECT)]))])
    response = await client.prompt("Capital of France?").call()
    assert response.content == "Paris."
    assert len(model.prompts) == 1
    assert len(jev_server.requests) == 1
    report = report_of(response)
    assert report.outcome == "passed"
    assert report.passed
    assert [a.answer for a in report.attempts] == ["Paris."]
    assert report.chosen == 1


async def test_a_failed_answer_is_retried_with_feedback_until_it_passes(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = judged_by_answer({"Lyon.": 0.1, "Paris.": 0.9})
    model = drafts("Lyon.", "Paris.")
    client = ChatClient(
        model,
        system="Answer in one word.",
        advisors=[SelfRefineAdvisor(Judge(jev, [noul("ok", IS_CORRECT, minimum=0.7)]))],
    )
    response = await client.prompt("Capital of France?").call()
    assert response.content == "Paris."
    retry = model.prompts[1]
    assert retry.messages[0] == jr.SystemMessage("Answer in one word.")
    last = retry.messages[-1]
    assert isinstance(last, UserMessage)
    assert last.text.startswith("Capital of France?\n\n")
    assert "- ok: The answer is wrong (P(yes) 0.10, needed at least 0.70)" in last.text
    report = report_of(response)
    assert report.outcome == "passed"
    assert [a.answer for a in report.attempts] == ["Lyon.", "Paris."]
    assert report.attempts[0].verdict is not None
    assert not report.attempts[0].verdict.passed


async def test_the_retry_prompt_is_rebuilt_from_the_original_so_feedback_never_compounds(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {"ok": 0.9}
    model = drafts("first draft", "second draft", "third draft")
    criteria = [
        check("not_first", lambda i: i.assistant_answer != "first draft", defect="DEFECT-ONE"),
        check("not_second", lambda i: i.assistant_answer != "second draft", defect="DEFECT-TWO"),
        noul("ok", IS_CORRECT),
    ]
    client = ChatClient(
        model, advisors=[SelfRefineAdvisor(Judge(jev, criteria), max_repeat_attempts=2)]
    )
    response = await client.prompt("Write a draft.").call()
    assert response.content == "third draft"
    second, third = (p.messages[-1] for p in model.prompts[1:])
    assert isinstance(second, UserMessage)
    assert isinstance(third, UserMessage)
    assert "DEFECT-ONE" in second.text
    assert "DEFECT-TWO" not in second.text
    assert "DEFECT-TWO" in third.text
    assert "DEFECT-ONE" not in third.text  # attempt 1's feedback is gone
    assert third.text.count("Write a draft.") == 1
    assert third.text.count("broke these rules") == 1
    # The judge's user_question is the original conversation every time, never the feedback.
    questions = {r.json["state"]["user_question"] for r in jev_server.requests}
    assert questions == {"user: Write a draft."}


async def test_user_question_prefixes_roles_and_includes_earlier_turns(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {"ok": 0.9}
    client = ChatClient(
        drafts("Blue."),
        system="Be brief.",
        advisors=[SelfRefineAdvisor(Judge(jev, [noul("ok", IS_CORRECT)]))],
    )
    await (
        client.prompt("And the sea?")
        .messages(UserMessage("Colour of the sky?"), jr.AssistantMessage("Blue."))
        .call()
    )
    state = jev_server.requests[0].json["state"]
    assert state == {
        "user_question": "system: Be brief.\nuser: Colour of the sky?\nassistant: Blue.\n"
        "user: And the sea?",
        "assistant_answer": "Blue.",
    }


async def test_attempts_are_capped_and_the_best_attempt_is_returned(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    # Nets: A=+1 (2 passed, 1 failed), B=-1, C=+1, D=-3. The later of A and C wins the tie.
    scores = {"A": (0.9, 0.9, 0.1), "B": (0.9, 0.1, 0.1), "C": (0.1, 0.9, 0.9), "D": (0, 0, 0)}

    def answer(state: Any, questions: dict[str, Any]) -> dict[str, float]:
        return dict(zip(questions, scores[state["assistant_answer"]], strict=True))

    jev_server.answer = answer
    model = drafts("A", "B", "C", "D", "E")
    criteria = [noul(n, IS_CORRECT) for n in ("x", "y", "z")]
    advisor = SelfRefineAdvisor(Judge(jev, criteria), max_repeat_attempts=3)
    response = await ChatClient(model, advisors=[advisor]).prompt("Go").call()
    assert len(model.prompts) == 4  # the first attempt + 3 retries, never more
    assert len(jev_server.requests) == 4
    assert response.content == "C"  # not the last one (D), and the later of the tie
    report = report_of(response)
    assert report.outcome == "best_attempt"
    assert report.chosen == 3
    assert [a.verdict.net_score for a in report.attempts if a.verdict] == [1, -1, 1, -3]


async def test_an_earlier_attempt_wins_when_it_is_strictly_better(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    scores = {"good": (0.9, 0.1), "bad": (0.1, 0.1)}
    jev_server.answer = lambda state, questions: dict(
        zip(questions, scores[state["assistant_answer"]], strict=True)
    )
    criteria = [noul("x", IS_CORRECT), noul("y", IS_CORRECT)]
    advisor = SelfRefineAdvisor(Judge(jev, criteria), max_repeat_attempts=2)
    response = await ChatClient(drafts("good", "bad"), advisors=[advisor]).prompt("Go").call()
    assert response.content == "good"
    assert report_of(response).chosen == 1


async def test_fail_on_exhausted_attempts_raises_with_the_verdict_and_every_attempt(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {"ok": 0.2}
    advisor = SelfRefineAdvisor(
        Judge(jev, [noul("ok", IS_CORRECT)]), max_repeat_attempts=2, fail_on_exhausted_attempts=True
    )
    client = ChatClient(drafts("one", "two", "three"), advisors=[advisor])
    with pytest.raises(SelfRefineFailedError) as info:
        await client.prompt("Go").call()
    error = info.value
    assert error.verdict.summary() == "passed=false [ok=FAILED]"
    assert error.verdict.failures()[0].detail.startswith("ok: The answer is wrong")
    assert [a.answer for a in error.attempts] == ["one", "two", "three"]
    assert all(a.usage.output_tokens == 1 for a in error.attempts)
    assert error.report.outcome == "failed"
    assert error.report.chosen is None
    assert "3 attempt(s)" in str(error)


async def test_the_error_carries_the_best_attempts_verdict_not_the_last(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    """Issue 20: the verdict on the error is the one the report would choose, not the last one."""
    scores = {"good": (0.9, 0.1), "bad": (0.1, 0.1)}
    jev_server.answer = lambda state, questions: dict(
        zip(questions, scores[state["assistant_answer"]], strict=True)
    )
    criteria = [noul("x", IS_CORRECT), noul("y", IS_CORRECT)]
    advisor = SelfRefineAdvisor(
        Judge(jev, criteria), max_repeat_attempts=1, fail_on_exhausted_attempts=True
    )
    with pytest.raises(SelfRefineFailedError) as info:
        await ChatClient(drafts("good", "bad"), advisors=[advisor]).prompt("Go").call()
    error = info.value
    assert error.best is not None
    assert error.best.index == 1
    assert error.best.answer == "good"
    assert error.verdict is error.best.verdict
    assert error.verdict.summary() == "passed=false [x=PASSED, y=FAILED]"
    # Every attempt's verdict stays reachable, the last one included.
    assert [a.verdict.summary() for a in error.attempts if a.verdict] == [
        "passed=false [x=PASSED, y=FAILED]",
        "passed=false [x=FAILED, y=FAILED]",
    ]


async def test_usage_is_summed_over_attempts_and_judging_calls(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = judged_by_answer({"bad answer": 0.1, "good": 0.9})
    advisor = SelfRefineAdvisor(Judge(jev, [noul("ok", IS_CORRECT)]))
    response = (
        await ChatClient(drafts("bad answer", "good"), advisors=[advisor]).prompt("Hi").call()
    )
    report = report_of(response)
    model_usage = sum((a.usage for a in report.attempts), jr.Usage())
    assert report.model_usage == model_usage
    assert report.model_usage.output_tokens == 3  # "bad answer" + "good"
    judge_tokens = [r.json for r in jev_server.requests]
    assert len(judge_tokens) == 2
    assert report.judge_usage.input_tokens > 0
    assert report.judge_usage == sum((a.judge_usage for a in report.attempts), jr.Usage())
    assert report.total_usage == report.model_usage + report.judge_usage
    # The returned response carries the model's usage over every attempt.
    assert response.chat_response.metadata.usage == report.model_usage


async def test_a_token_budget_stops_retrying_once_spent(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {"ok": 0.1}
    model = drafts("one", "two", "three")
    advisor = SelfRefineAdvisor(
        Judge(jev, [noul("ok", IS_CORRECT)]), max_repeat_attempts=5, token_budget=1
    )
    response = await ChatClient(model, advisors=[advisor]).prompt("Go").call()
    assert len(model.prompts) == 1
    assert report_of(response).outcome == "best_attempt"
    with pytest.raises(ValueError, match="token_budget"):
        SelfRefineAdvisor(Judge(jev, [noul("ok", IS_CORRECT)]), token_budget=0)


async def test_the_feedback_template_may_quote_the_rejected_answer(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = judged_by_answer({"wrong": 0.0, "right": 1.0})
    model = drafts("wrong", "right")
    advisor = SelfRefineAdvisor(
        Judge(jev, [noul("ok", IS_CORRECT)]),
        feedback_template="\n\nYou said: {answer}\nProblems:\n{feedback}",
    )
    await ChatClient(model, advisors=[advisor]).prompt("Go").call()
    last = model.prompts[1].messages[-1]
    assert isinstance(last, UserMessage)
    assert last.text.startswith("Go\n\nYou said: wrong\nProblems:\n- ok: ")


def test_a_request_without_a_user_message_gets_the_feedback_as_a_new_one() -> None:
    from jevrefine.advisors.self_refine._input import retry_prompt

    prompt = Prompt((jr.SystemMessage("s"), jr.AssistantMessage("a")))
    assert retry_prompt(prompt, "\n\nfix it").messages[-1] == UserMessage("fix it")


async def test_judge_input_carries_retrieved_documents(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {"ok": 0.9}

    class Retrieve:
        name = "retrieve"
        order = 0

        async def advise_call(
            self, request: jr.ChatClientRequest, chain: jr.CallAdvisorChain
        ) -> jr.ChatClientResponse:
            request.context[context_keys.RETRIEVAL_DOCUMENTS] = ["Paris is in France."]
            return await chain.next_call(request)

    advisor = SelfRefineAdvisor(Judge(jev, [noul("ok", IS_CORRECT)]))
    await ChatClient(drafts("Paris"), advisors=[Retrieve(), advisor]).prompt("Where?").call()
    assert jev_server.requests[0].json["state"]["supporting_context"] == ["Paris is in France."]


async def test_the_limit_of_100_retries_is_reachable_and_never_exceeded(
    jev_server: FakeJevServer, jev: JudgeClient
) -> None:
    jev_server.answer = lambda state, questions: {"ok": 0.0}
    model = FunctionModel(lambda prompt: f"draft {len(model.prompts)}")
    advisor = SelfRefineAdvisor(Judge(jev, [noul("ok", IS_CORRECT)]), max_repeat_attempts=100)
    response = await ChatClient(model, advisors=[advisor]).prompt("Go").call()
    assert len(model.prompts) == 101
    assert len(jev_server.requests) == 101
    report = report_of(response)
    assert report.outcome == "best_attempt"
    assert report.chosen == 101  # all tie at -1: the latest wins
    # Every retry carries exactly one feedback section, however many came before.
    assert all(str(p.messages[-1]).count("broke these rules") == 1 for p in model.prompts[1:])
