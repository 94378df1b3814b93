"""Typed output meets self-refine (issue 32, 3): an answer `entity(T)` cannot read as `T` is a
failed attempt whose feedback is the validation error, and the retry is told it."""

from __future__ import annotations

import json

import pydantic
import pytest

from jevrefine import ChatClient, Prompt, SelfRefineAdvisor, context_keys
from jevrefine.exceptions import StructuredOutputError
from jevrefine.judge import Judge, check
from jevrefine.testing import FunctionModel


class CityFacts(pydantic.BaseModel):
    city: str
    country: str
    population_millions: float = pydantic.Field(gt=0, lt=100)


def facts(population: object) -> str:
    return json.dumps({"city": "Paris", "country": "France", "population_millions": population})


def scripted(*answers: str) -> FunctionModel:
    queue = list(answers)
    return FunctionModel(lambda prompt: queue.pop(0))


def user_text(prompt: Prompt) -> str:
    return prompt.messages[-1].text  # type: ignore[union-attr]


async def test_a_retry_carries_the_validation_error_and_the_fitting_answer_is_returned() -> None:
    """Promise: the first answer (6000000 million) fails `fits_output_type` with the
    validation error; the second attempt's prompt holds it; `entity()` returns the fix."""
    model = scripted(facts(6000000), facts(2.1))
    client = ChatClient(model, advisors=[SelfRefineAdvisor(Judge(criteria=[]))])
    spec = client.prompt("Give the facts about Paris.")
    answer = await spec.entity(CityFacts, native=False)
    assert answer.population_millions == 2.1
    retry = user_text(model.prompts[1])
    assert "population_millions: input should be less than 100; you wrote 6000000" in retry
    # The feedback comes before the format instructions, which stay last.
    assert retry.index("you wrote 6000000") < retry.index("[jevrefine:output-format]")


async def test_a_plain_call_is_not_type_checked_and_an_entity_call_is() -> None:
    model = scripted("Paris is in France.", facts(2.1))
    judge = Judge(criteria=[check("mentions_paris", lambda i: "Paris" in i.assistant_answer,
                                  "The answer does not name the city")])  # fmt: skip
    client = ChatClient(model, advisors=[SelfRefineAdvisor(judge)])
    response = await client.prompt("Paris?").call()  # plain call: no type, no type check
    report = response.context[context_keys.REFINE_REPORT]
    assert report.outcome == "passed"
    assert len(report.attempts) == 1
    model = scripted("Paris is in France.", facts(2.1))
    client = ChatClient(model, advisors=[SelfRefineAdvisor(judge)])
    await client.prompt("Paris?").entity(CityFacts)
    verdict_text = user_text(model.prompts[1])
    assert "fits_output_type: The answer is not a JSON value" in verdict_text


async def test_when_no_attempt_fits_entity_still_raises_with_the_last_text() -> None:
    model = scripted(facts(6000000), facts(7000000), facts(8000000))
    advisor = SelfRefineAdvisor(Judge(criteria=[]), max_repeat_attempts=2)
    client = ChatClient(model, advisors=[advisor])
    with pytest.raises(StructuredOutputError) as caught:
        await client.prompt("Paris?").entity(CityFacts)
    assert "8000000" in caught.value.raw_text  # the later attempt on a tie
    assert len(model.prompts) == 3


async def test_a_fitting_answer_adds_nothing_to_the_verdict() -> None:
    model = scripted(facts(2.1))
    judge = Judge(criteria=[check("ok", lambda i: True, "never")])
    client = ChatClient(model, advisors=[SelfRefineAdvisor(judge)])
    spec = client.prompt("Paris?")
    assert (await spec.entity(CityFacts)).city == "Paris"
    (prompt,) = model.prompts
    assert "fits_output_type" not in user_text(prompt)


async def test_the_feedback_says_what_a_field_means_when_the_type_describes_it() -> None:
    class Described(pydantic.BaseModel):
        population_millions: float = pydantic.Field(
            lt=100, description="the number of inhabitants, in millions"
        )

    model = scripted('{"population_millions": 2100000}', '{"population_millions": 2.1}')
    client = ChatClient(model, advisors=[SelfRefineAdvisor(Judge(criteria=[]))])
    assert (await client.prompt("Paris?").entity(Described)).population_millions == 2.1
    assert (
        "population_millions (the number of inhabitants, in millions): input should be less "
        "than 100; you wrote 2100000"
    ) in user_text(model.prompts[1])
