"""reference_judge: the judge model answers the question itself first, then compares (issue 32,
1): one reference per question, in the state as `expected_output`, never in the feedback."""

from __future__ import annotations

import json

import anyio
import pytest

from jevrefine import ChatClient, Prompt, SelfRefineAdvisor
from jevrefine.jev import JudgeUsageError
from jevrefine.judge import JudgeInput, ModelJudgeClient, reference_judge
from jevrefine.testing import FunctionModel

REFERENCE = "The capital of France is Paris."


class JudgeModel:
    """A judge model: writes REFERENCE when asked for one; says yes when the answer has Paris."""

    def __init__(self) -> None:
        self.references = 0
        self.states: list[dict[str, object]] = []

    async def __call__(self, prompt: Prompt) -> str:
        text = prompt.messages[-1].text  # type: ignore[union-attr]
        if "Write a correct answer" in text:
            self.references += 1
            await anyio.sleep(0.01)  # a reference takes a while: others arrive meanwhile
            return REFERENCE
        state = json.loads(text.split("State:\n", 1)[1].split("\n\nQuestion:", 1)[0])
        self.states.append(state)
        return json.dumps({"answer": "yes" if "Paris" in state["assistant_answer"] else "no"})


async def test_the_reference_reaches_the_state_and_decides() -> None:
    model = JudgeModel()
    judge = reference_judge(FunctionModel(model))
    right = await judge.evaluate(JudgeInput("user: Capital of France?", "Paris."))
    wrong = await judge.evaluate(JudgeInput("user: Capital of France?", "Lyon."))
    assert right.passed
    assert not wrong.passed
    assert model.references == 1  # the second judgement of the question reuses it
    assert list(model.states[0]) == ["user_question", "assistant_answer", "expected_output"]
    assert model.states[0]["expected_output"] == REFERENCE
    # What the failed answer is told says it is wrong, not what is right.
    assert "does not give a correct answer" in wrong.feedback
    assert "Paris" not in wrong.feedback
    assert right.response is not None
    assert right.response.usage.total_tokens > 0


async def test_concurrent_judgements_of_one_question_write_one_reference() -> None:
    model = JudgeModel()
    judge = reference_judge(FunctionModel(model))
    async with anyio.create_task_group() as group:
        for answer in ("Paris.", "Lyon.", "Nice.", "Paris!"):
            group.start_soon(judge.evaluate, JudgeInput("user: Capital of France?", answer))
    assert model.references == 1
    client = judge.client
    assert isinstance(client, ModelJudgeClient)
    assert client._writing == {}  # nothing kept per question once it is written


async def test_a_given_expected_output_is_used_as_is() -> None:
    model = JudgeModel()
    judge = reference_judge(FunctionModel(model))
    given = JudgeInput("user: Capital of France?", "Paris.", expected_output="Paris")
    assert (await judge.evaluate(given)).passed
    assert model.references == 0
    assert model.states[0]["expected_output"] == "Paris"


async def test_the_retries_of_a_refinement_share_one_reference() -> None:
    model = JudgeModel()
    drafts = iter(["Lyon.", "Marseille.", "Paris."])
    answering = FunctionModel(lambda prompt: next(drafts))
    advisor = SelfRefineAdvisor(reference_judge(FunctionModel(model)), max_repeat_attempts=2)
    answer = await ChatClient(answering, advisors=[advisor]).prompt("Capital of France?").content()
    assert answer == "Paris."
    assert model.references == 1
    assert len(model.states) == 3
    for prompt in answering.prompts[1:]:
        assert REFERENCE not in prompt.messages[-1].text  # type: ignore[union-attr]


def test_bad_arguments_are_named() -> None:
    with pytest.raises(JudgeUsageError, match="reference_answers='yes' is not a bool"):
        ModelJudgeClient(FunctionModel(lambda p: "x"), reference_answers="yes")  # type: ignore[arg-type]
    with pytest.raises(JudgeUsageError, match="minimum=2 must be at most 1"):
        reference_judge(FunctionModel(lambda p: "x"), minimum=2)


async def test_the_comparison_reads_the_conversation_without_its_system_message() -> None:
    """A small judge marks a right answer down for a system message's format rules: the
    reference and the comparison read the user's turns only (one reference for both)."""
    model = JudgeModel()
    judge = reference_judge(FunctionModel(model))
    question = "system: Answer in two sentences,\nplease.\nuser: Capital of France?"
    assert (await judge.evaluate(JudgeInput(question, "Paris."))).passed
    assert (await judge.evaluate(JudgeInput("user: Capital of France?", "Paris!"))).passed
    assert model.references == 1
    assert [s["user_question"] for s in model.states] == ["user: Capital of France?"] * 2


def test_without_system_keeps_every_other_turn() -> None:
    from jevrefine.judge._reference import without_system

    conversation = "system: Be brief.\nMore rules.\nuser: Hi\nthere\nassistant: Hello\nuser: Why?"
    assert without_system(conversation) == "user: Hi\nthere\nassistant: Hello\nuser: Why?"
    assert without_system("system: only a system message") == "system: only a system message"
