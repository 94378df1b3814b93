import json
import math
from typing import Never

import anyio
import pytest

from jevrefine.exceptions import ModelHTTPError
from jevrefine.jev import (
    Choice,
    JudgeResponseError,
    JudgeTimeoutError,
    JudgeUsageError,
    Noul,
    Score,
    SystemOneClient,
    SystemOneRequest,
    system_one_all,
)
from jevrefine.judge import ModelJudgeClient
from jevrefine.messages import (
    AssistantMessage,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    TokenLogprob,
    Usage,
)
from jevrefine.testing import FunctionModel

QUESTIONS = {
    "is_grounded": Noul("Is every claim supported?", when_true="All supported", when_false="Not"),
    "department": Choice("Which team?", options={"billing": "Payments", "technical": None}),
    "frustration": Score("How frustrated?", levels=["Calm", "Frustrated", "Very angry"]),
}


def _allowed(prompt) -> list[str]:
    fmt = prompt.options.response_format
    if fmt is not None:
        return list(fmt.schema["properties"]["answer"]["enum"])
    grammar = prompt.options.extra_body["grammar"]
    return [json.loads(part) for part in grammar.removeprefix("root ::= ").split(" | ")]


def _lp(p: float) -> float:
    return math.log(p)


def json_logprob_response(top: list[tuple[str, float]], sampled: str) -> ChatResponse:
    """A JSON answer whose value token carries the given alternatives (probabilities)."""
    tokens = ["{", '"', "answer", '":', ' "', sampled, '"}']
    logprobs = [TokenLogprob(t, -0.1, ((t, -0.1),)) for t in tokens]
    value_index = 5
    logprobs[value_index] = TokenLogprob(sampled, -1.0, tuple((t, _lp(p)) for t, p in top))
    text = "".join(tokens)
    return ChatResponse(
        (Generation(AssistantMessage(text), {"finish_reason": "stop", "logprobs": logprobs}),),
        ChatResponseMetadata(model="judge-model-v1", usage=Usage(10, 7)),
    )


async def test_without_logprobs_answers_are_marked_not_calibrated() -> None:
    def answer(prompt):
        allowed = _allowed(prompt)
        pick = {"yes": "yes", "billing": "billing", "2": "2"}
        return json.dumps({"answer": next(pick[a] for a in allowed if a in pick)})

    model = FunctionModel(answer)
    client = ModelJudgeClient(model)
    assert isinstance(client, SystemOneClient)
    response = await client.system_one({"text": "hello"}, QUESTIONS)
    assert list(response.answers) == list(QUESTIONS)
    assert response.noul("is_grounded").noul == 1.0
    assert not response.noul("is_grounded").calibrated
    choice = response.choice("department")
    assert (choice.choice, dict(choice.probabilities)) == (
        "billing",
        {"billing": 1.0, "technical": 0.0},
    )
    assert choice.confidence is None
    assert not choice.calibrated
    score = response.score("frustration")
    assert score.score == 2.0
    assert score.legend == {0: "Calm", 1: "Frustrated", 2: "Very angry"}
    assert not response.calibrated
    assert response.model == "function"
    assert response.usage.input_tokens > 0
    # One constrained request per question, each with its own enum.
    assert len(model.prompts) == 3
    enums = sorted(tuple(_allowed(p)) for p in model.prompts)
    assert enums == [("0", "1", "2"), ("billing", "technical"), ("yes", "no")]
    prompt = model.prompts[0]
    assert prompt.options.temperature == 0.0
    assert prompt.options.logprobs is True
    assert prompt.options.top_logprobs == 20
    user = prompt.messages[-1].text
    assert '"text": "hello"' in user


async def test_the_prompt_carries_descriptions_and_levels() -> None:
    model = FunctionModel(lambda p: json.dumps({"answer": _allowed(p)[0]}))
    await ModelJudgeClient(model).system_one("s", QUESTIONS)
    texts = "\n".join(p.messages[-1].text for p in model.prompts)
    for fragment in (
        'Answer "yes" when: All supported',
        'Answer "no" when: Not',
        "- billing: Payments",
        "- technical",
        "0: Calm",
        "2: Very angry",
        "Question: How frustrated?",
    ):
        assert fragment in texts


async def test_probabilities_come_from_logprobs_and_decide_the_answer() -> None:
    def answer(prompt):
        allowed = _allowed(prompt)
        if allowed == ["yes", "no"]:
            # Unconstrained alternatives, as llama.cpp reports them: case variants and junk.
            return json_logprob_response(
                [("yes", 0.5), ("Yes", 0.1), ("no", 0.2), ("The", 0.15)], sampled="yes"
            )
        if allowed == ["billing", "technical"]:
            # The sampled token is not the most likely: the answer follows the probabilities.
            return json_logprob_response([("tech", 0.6), ("bill", 0.3), ("I", 0.1)], sampled="bill")
        return json_logprob_response([("0", 0.1), ("1", 0.6), ("2", 0.3)], sampled="1")

    response = await ModelJudgeClient(FunctionModel(answer)).system_one("s", QUESTIONS)
    assert response.noul("is_grounded").noul == pytest.approx(0.6 / 0.8)
    assert response.noul("is_grounded").calibrated
    choice = response.choice("department")
    assert choice.choice == "technical"
    assert choice.probability_of("technical") == pytest.approx(2 / 3)
    assert choice.confidence is not None
    assert 0 < choice.confidence < 1
    score = response.score("frustration")
    assert score.probabilities == pytest.approx({0: 0.1, 1: 0.6, 2: 0.3})
    assert score.score == pytest.approx(0.6 + 2 * 0.3)
    assert response.calibrated
    assert response.model == "judge-model-v1"
    assert response.usage == Usage(30, 21)


async def test_a_quote_sharing_the_value_token_is_handled() -> None:
    tokens = ['{"answer": ', '"yes', '"}']
    logprobs = [
        TokenLogprob(tokens[0], -0.1),
        TokenLogprob(tokens[1], -0.3, (('"yes', _lp(0.3)), ('"no', _lp(0.6)), ("x", _lp(0.1)))),
        TokenLogprob(tokens[2], -0.1),
    ]
    reply = ChatResponse((Generation(AssistantMessage("".join(tokens)), {"logprobs": logprobs}),))
    response = await ModelJudgeClient(FunctionModel(lambda p: reply)).system_one(
        "s", {"q": Noul("q?")}
    )
    assert response.noul("q").noul == pytest.approx(1 / 3)


async def test_no_allowed_answer_among_the_alternatives_falls_back_to_the_text() -> None:
    reply = json_logprob_response([("The", 0.9), ("I", 0.1)], sampled="no")
    response = await ModelJudgeClient(FunctionModel(lambda p: reply)).system_one(
        "s", {"q": Noul("q?")}
    )
    assert response.noul("q").noul == 0.0
    assert not response.noul("q").calibrated


async def test_grammar_constraint() -> None:
    def answer(prompt):
        assert prompt.options.response_format is None
        assert prompt.options.extra_body["grammar"].startswith("root ::= ")
        logprobs = [
            TokenLogprob("yes", -5.0, (("No", _lp(0.5)), ("Yes", _lp(0.2)), ("The", _lp(0.3))))
        ]
        return ChatResponse((Generation(AssistantMessage("yes"), {"logprobs": logprobs}),))

    client = ModelJudgeClient(FunctionModel(answer), constraint="grammar")
    response = await client.system_one("s", {"q": Noul("q?")})
    # Decided from the probabilities, not from the grammar-forced sample.
    assert response.noul("q").noul == pytest.approx(0.2 / 0.7)


async def test_an_answer_outside_the_allowed_ones_is_a_response_error() -> None:
    client = ModelJudgeClient(FunctionModel(lambda p: '{"answer": "maybe"}'))
    with pytest.raises(JudgeResponseError, match=r"'q'.*maybe"):
        await client.system_one("s", {"q": Noul("q?")})


async def test_model_errors_pass_through_unwrapped() -> None:
    def fail(prompt) -> Never:
        raise ModelHTTPError(503, {"error": {"message": "down"}})

    with pytest.raises(ModelHTTPError) as info:
        await ModelJudgeClient(FunctionModel(fail)).system_one("s", QUESTIONS)
    assert info.value.status_code == 503


async def test_questions_run_concurrently_within_the_bound() -> None:
    in_flight = peak = 0

    async def answer(prompt):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.sleep(0.02)
        in_flight -= 1
        return json.dumps({"answer": _allowed(prompt)[0]})

    questions = {f"q{i}": Noul(f"q{i}?") for i in range(7)}
    await ModelJudgeClient(FunctionModel(answer), concurrency=3).system_one("s", questions)
    assert peak == 3
    peak = 0
    client = ModelJudgeClient(FunctionModel(answer), concurrency=2)
    await system_one_all(
        client, [SystemOneRequest("a", questions), SystemOneRequest("b", questions)]
    )
    assert peak == 2  # the bound is the client's, shared by concurrent calls


async def test_timeout() -> None:
    async def slow(prompt) -> str:
        await anyio.sleep(5)
        return "{}"

    with pytest.raises(JudgeTimeoutError):
        await ModelJudgeClient(FunctionModel(slow)).system_one("s", {"q": Noul("q?")}, timeout=0.05)


async def test_bad_arguments() -> None:
    with pytest.raises(JudgeUsageError):
        ModelJudgeClient("not a model")  # type: ignore[arg-type]
    with pytest.raises(JudgeUsageError):
        ModelJudgeClient(FunctionModel(lambda p: ""), concurrency=0)
    with pytest.raises(JudgeUsageError):
        ModelJudgeClient(FunctionModel(lambda p: ""), constraint="regex")  # type: ignore[arg-type]
    client = ModelJudgeClient(FunctionModel(lambda p: ""))
    with pytest.raises(JudgeUsageError, match="noul, choice and score"):
        await client.system_one("s", {"b": {"type": "box", "instructions": "dog"}})
    with pytest.raises(JudgeUsageError):
        await client.system_one(1, {"q": Noul("q?")})  # type: ignore[arg-type]


@pytest.mark.local_model
@pytest.mark.parametrize("constraint", ["json_schema", "grammar"])
async def test_the_local_model_answers_with_calibrated_probabilities(
    local_server, constraint
) -> None:
    async with local_server.openai_model() as model:
        client = ModelJudgeClient(model, constraint=constraint, concurrency=1)
        response = await client.system_one(
            {"statement": "Paris is the capital of France."},
            {
                "is_true": Noul("Is `statement` true?"),
                "topic": Choice("What is `statement` about?", options=["geography", "cooking"]),
                "confidence": Score("How sure can one be?", levels=["unsure", "fairly", "certain"]),
            },
        )
    assert response.model == "smollm2"
    assert response.usage.input_tokens > 0
    noul = response.noul("is_true")
    assert 0.0 <= noul.noul <= 1.0
    choice = response.choice("topic")
    assert sum(choice.probabilities.values()) == pytest.approx(1.0)
    assert choice.choice == max(choice.probabilities, key=choice.probabilities.get)
    score = response.score("confidence")
    assert 0.0 <= score.score <= 2.0
    if score.calibrated:
        assert score.score == pytest.approx(sum(k * p for k, p in score.probabilities.items()))
    # llama.cpp returns logprobs, so at least the yes/no question is calibrated.
    assert noul.calibrated
