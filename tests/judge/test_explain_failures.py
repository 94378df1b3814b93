"""ModelJudgeClient: temperature 0, few-shot examples, and written feedback for failures."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from jevrefine import ChatClient, Prompt, SelfRefineAdvisor, context_keys
from jevrefine.exceptions import ModelConnectionError
from jevrefine.jev import JudgeUsageError, Noul
from jevrefine.judge import Judge, JudgeExample, JudgeInput, ModelJudgeClient, Outcome, noul
from jevrefine.judge._explain import MAX_EXPLANATION_CHARS, bound_sentence
from jevrefine.testing import FunctionModel

CORRECT = Noul("Is `assistant_answer` a correct answer to `user_question`?", when_false="Wrong")
SHORT = Noul("Is `assistant_answer` one sentence or shorter?", when_false="Too long")
FEEDBACK = "Name Paris, not Lyon, as the capital of France."


class JudgeModel:
    """Answers judging requests by rule and feedback requests with `feedback`."""

    def __init__(self, feedback: str = FEEDBACK, fail_feedback: bool = False) -> None:
        self.feedback = feedback
        self.fail_feedback = fail_feedback
        self.model = FunctionModel(self.answer, model_name="judge")

    def answer(self, prompt: Prompt) -> str:
        user = prompt.messages[-1].text
        if prompt.options.response_format is None:  # a feedback request
            if self.fail_feedback:
                raise ModelConnectionError("judge model unreachable: SECRET")
            return self.feedback
        state = json.loads(user.split("State:\n", 1)[1].split("\n\nQuestion:", 1)[0])
        if "one sentence" in user:
            return '{"answer": "yes"}'
        return json.dumps({"answer": "yes" if "Paris" in state["assistant_answer"] else "no"})

    @property
    def feedback_prompts(self) -> list[Prompt]:
        return [p for p in self.model.prompts if p.options.response_format is None]


def judge_of(model: JudgeModel, **options: Any) -> Judge:
    client = ModelJudgeClient(model.model, logprobs=False, explain_failures=True, **options)
    return Judge(client, [noul("is_correct", CORRECT, 0.7), noul("is_short", SHORT, 0.5)])


async def test_a_failed_criterion_gets_the_judge_models_sentence_in_its_detail() -> None:
    model = JudgeModel()
    verdict = await judge_of(model).evaluate(JudgeInput("user: Capital of France?", "Lyon."))
    assert not verdict.passed
    (failure,) = verdict.failures()
    assert failure.criterion == "is_correct"
    # The numbers stay; the judge's own reason follows.
    assert failure.detail == (
        "is_correct: Wrong (P(yes) 0.00, needed at least 0.70). Feedback: " + FEEDBACK
    )
    assert FEEDBACK in verdict.feedback
    # One feedback request, for the failed criterion only, deterministic, naming it.
    (asked,) = model.feedback_prompts
    assert asked.options.temperature == 0.0
    text = asked.messages[-1].text
    assert CORRECT.instructions in text
    assert '"assistant_answer": "Lyon."' in text
    assert "P(yes) 0.00" in text
    # Its tokens count as judge tokens.
    judging = [p for p in model.model.prompts if p.options.response_format is not None]
    assert len(judging) == 2
    assert verdict.response is not None
    # Two judging answers of two "words" each (FunctionModel counts words), then the sentence.
    assert verdict.response.usage.output_tokens == 2 * 2 + len(FEEDBACK.split())


async def test_a_passing_answer_costs_no_feedback_request() -> None:
    model = JudgeModel()
    verdict = await judge_of(model).evaluate(JudgeInput("user: Capital of France?", "Paris."))
    assert verdict.passed
    assert model.feedback_prompts == []


async def test_without_the_option_no_feedback_is_asked() -> None:
    model = JudgeModel()
    client = ModelJudgeClient(model.model, logprobs=False)
    judge = Judge(client, [noul("is_correct", CORRECT, 0.7)])
    verdict = await judge.evaluate(JudgeInput("user: Capital of France?", "Lyon."))
    assert "Feedback:" not in verdict.failures()[0].detail
    assert model.feedback_prompts == []


async def test_the_feedback_is_bounded_to_one_line() -> None:
    rambling = "You should\n\nreally " + "consider " * 200 + "Paris."
    model = JudgeModel(feedback=rambling)
    verdict = await judge_of(model).evaluate(JudgeInput("user: Capital?", "Lyon."))
    written = verdict.failures()[0].detail.split("Feedback: ", 1)[1]
    assert len(written) <= MAX_EXPLANATION_CHARS
    assert "\n" not in written
    assert written.startswith("You should really consider")
    assert written.endswith("…")


def test_bound_sentence() -> None:
    assert bound_sentence('  "Say   Paris."\n') == "Say Paris."
    cut = bound_sentence("word " * 100, limit=50)
    assert len(cut) <= 50
    assert cut.endswith("word…")


async def test_a_failing_feedback_request_keeps_the_plain_detail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = JudgeModel(fail_feedback=True)
    with caplog.at_level(logging.WARNING, logger="jevrefine.judge"):
        verdict = await judge_of(model).evaluate(JudgeInput("user: Capital?", "Lyon."))
    assert verdict.failures()[0].detail == ("is_correct: Wrong (P(yes) 0.00, needed at least 0.70)")
    (record,) = [r for r in caplog.records if r.name == "jevrefine.judge"]
    assert "ModelConnectionError" in record.getMessage()
    assert "SECRET" not in record.getMessage()


async def test_the_retry_prompt_carries_the_judges_own_reasons() -> None:
    model = JudgeModel()
    drafts = iter(["Lyon.", "Paris."])
    answering = FunctionModel(lambda prompt: next(drafts))
    client = ChatClient(answering, advisors=[SelfRefineAdvisor(judge_of(model))])
    response = await client.prompt("What is the capital of France?").call()
    assert response.content == "Paris."
    assert response.context[context_keys.REFINE_REPORT].outcome == "passed"
    assert FEEDBACK in answering.prompts[1].messages[-1].text


async def test_few_shot_examples_are_shown_after_the_question() -> None:
    model = JudgeModel()
    examples = {
        "is_correct": [
            JudgeExample({"user_question": "Capital of Italy?", "assistant_answer": "Rome"}, True),
            JudgeExample({"user_question": "Capital of Spain?", "assistant_answer": "Porto"}, "no"),
        ]
    }
    client = ModelJudgeClient(model.model, logprobs=False, examples=examples)
    await client.system_one(
        {"user_question": "Capital of France?", "assistant_answer": "Paris"},
        {"is_correct": CORRECT, "is_short": SHORT},
    )
    by_question = {
        ("one sentence" in p.messages[-1].text): p.messages[-1].text for p in model.model.prompts
    }
    correct_prompt = by_question[False]
    assert "Example 1 state:" in correct_prompt
    assert '"assistant_answer": "Rome"}\nAnswer: yes' in correct_prompt
    assert '"assistant_answer": "Porto"}\nAnswer: no' in correct_prompt
    assert correct_prompt.index("Question:") < correct_prompt.index("Example 1")
    assert "Example" not in by_question[True]  # examples belong to their question only
    assert all(p.options.temperature == 0.0 for p in model.model.prompts)


async def test_an_example_with_an_impossible_answer_is_refused() -> None:
    model = JudgeModel()
    client = ModelJudgeClient(model.model, examples={"q": [JudgeExample("s", "maybe")]})
    with pytest.raises(JudgeUsageError, match="maybe"):
        await client.system_one("s", {"q": CORRECT})
    assert model.model.prompts == []


async def test_temperature_is_configurable() -> None:
    model = JudgeModel()
    client = ModelJudgeClient(model.model, logprobs=False, temperature=0.3)
    await client.system_one({"assistant_answer": "Paris"}, {"q": CORRECT})
    assert model.model.prompts[0].options.temperature == 0.3
    with pytest.raises(JudgeUsageError, match="temperature"):
        ModelJudgeClient(model.model, temperature=-1)


@pytest.mark.local_model
async def test_explain_failures_on_the_local_model(local_server: Any) -> None:
    async with local_server.openai_model() as chat_model:
        client = ModelJudgeClient(chat_model, explain_failures=True, concurrency=1)
        judge = Judge(client, [noul("is_correct", CORRECT, minimum=1.0)])
        verdict = await judge.evaluate(
            JudgeInput("user: What is 2 + 2?", "2 + 2 is 5, and the Moon is made of cheese.")
        )
    (failure,) = verdict.failures()
    assert failure.outcome is Outcome.FAILED
    plain, _, written = failure.detail.partition(". Feedback: ")
    assert plain.startswith("is_correct: Wrong (P(yes) ")
    assert 0 < len(written) <= MAX_EXPLANATION_CHARS
    assert "\n" not in written
    assert verdict.response is not None
    assert verdict.response.usage.input_tokens > 0


async def test_a_feedback_request_is_its_own_chat_span_under_the_callers_span() -> None:
    from otel_support import Otel

    otel = Otel()
    model = JudgeModel()
    verdict = await judge_of(model, **otel.providers).evaluate(
        JudgeInput("user: Capital of France?", "Lyon.")
    )
    assert not verdict.passed
    chats = [s for s in otel.spans() if s.name == "chat judge"]
    # Two judging requests and one feedback request, each a CLIENT span with its own metrics.
    assert len(chats) == 3
    feedback = [
        s for s in chats if s.attributes and s.attributes.get("gen_ai.request.max_tokens") == 96
    ]
    assert len(feedback) == 1
    assert feedback[0].attributes["gen_ai.usage.output_tokens"] == len(FEEDBACK.split())  # type: ignore[index]
    durations = otel.metrics()["gen_ai.client.operation.duration"].data.data_points  # type: ignore[union-attr]
    assert sum(point.count for point in durations) == 3  # type: ignore[attr-defined,misc]


async def test_a_failed_feedback_request_marks_its_span_as_an_error() -> None:
    from otel_support import Otel

    otel = Otel()
    model = JudgeModel(fail_feedback=True)
    verdict = await judge_of(model, **otel.providers).evaluate(
        JudgeInput("user: Capital of France?", "Lyon.")
    )
    assert not verdict.passed  # the finding keeps its plain detail
    failed = [s for s in otel.spans() if s.status.status_code.name == "ERROR"]
    assert [s.attributes["error.type"] for s in failed] == ["ModelConnectionError"]  # type: ignore[index]
