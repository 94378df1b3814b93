"""Structured output is data: the output spec travels on the request and is rendered only at the
terminal link, so advisors (the judge, memory, retrieval, the guardrail) see the caller's text.

The prompt-based path runs on both HTTP adapters against their fake servers: what the servers
received is asserted, and so is what the judge (a fake Jev server) and the guardrail were sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pydantic
import pytest

import jevrefine as jr
from jevrefine import ChatClient, ChatClientRequest, ChatOptions, Prompt, UserMessage, context_keys
from jevrefine.advisors import (
    GuardrailAdvisor,
    GuardrailOutcome,
    MessageChatMemoryAdvisor,
    RefineReport,
    RetrievalAdvisor,
    SelfRefineAdvisor,
    ToolCallingAdvisor,
)
from jevrefine.jev import JudgeClient, Noul, RetryPolicy
from jevrefine.judge import Judge, noul
from jevrefine.memory import InMemoryChatMemory
from jevrefine.retrieval import Document
from jevrefine.structured import FORMAT_INSTRUCTIONS_MARKER, output_spec
from jevrefine.testing import FakeAnthropicServer, FakeJevServer, FakeOpenAIServer, FunctionModel

QUESTION = "Which city is the capital of France?"
GOOD = '{"name": "Paris", "population": 2100000}'
BAD = '{"name": "Lyon", "population": 500000}'
SECRET = "sk-test-SECRET-structured"
IS_RIGHT = Noul("Does `assistant_answer` name the capital?", when_false="Name the capital.")


class City(pydantic.BaseModel):
    name: str
    population: int


async def _no_sleep(seconds: float) -> None:
    return None


# -- both adapters: a scripted fake server, and what it received ------------------------------


class Adapter:
    """One HTTP adapter over its fake server: script answers, read the user texts it received."""

    def __init__(self, name: str, server: Any, model: jr.ChatModel) -> None:
        self.name = name
        self.server = server
        self.model = model

    def script(self, *answers: str) -> None:
        self.server.script(*answers)

    def last_user_texts(self) -> list[str]:
        """The text of the last user message of every chat request the server received."""
        if self.name == "openai":
            return [body["messages"][-1]["content"] for body in self.server.chat_requests]
        texts = []
        for request in self.server.requests:
            content = request.json["messages"][-1]["content"]
            texts.append(content if isinstance(content, str) else content[0]["text"])
        return texts

    def bodies(self) -> list[dict[str, Any]]:
        if self.name == "openai":
            return list(self.server.chat_requests)
        return [request.json for request in self.server.requests]


@pytest.fixture(params=["openai", "anthropic"])
async def adapter(request: pytest.FixtureRequest) -> AsyncIterator[Adapter]:
    if request.param == "openai":
        from jevrefine.models.openai import OpenAIChatModel

        async with (
            FakeOpenAIServer() as server,
            OpenAIChatModel(
                "gpt-test", base_url=server.base_url, api_key=SECRET, max_retries=0
            ) as model,
        ):
            yield Adapter("openai", server, model)
    else:
        from jevrefine.models.anthropic import AnthropicChatModel

        async with (
            FakeAnthropicServer() as fake,
            AnthropicChatModel(
                "claude-test", base_url=fake.base_url, api_key=SECRET, max_retries=0
            ) as claude,
        ):
            yield Adapter("anthropic", fake, claude)


@pytest.fixture
async def jev_server() -> AsyncIterator[FakeJevServer]:
    async with FakeJevServer() as server:
        yield server


@pytest.fixture
async def jev(jev_server: FakeJevServer) -> AsyncIterator[JudgeClient]:
    retry = RetryPolicy(max_retries=0, sleep=_no_sleep, jitter=0.0)
    async with JudgeClient("sk-jev-SECRET-7", base_url=jev_server.base_url, retry=retry) as client:
        yield client


def _judged_by_answer(verdicts: dict[str, float]) -> Callable[[Any, Any], dict[str, float]]:
    def answer(state: Any, questions: dict[str, Any]) -> dict[str, float]:
        return dict.fromkeys(questions, verdicts[state["assistant_answer"]])

    return answer


def _instructions() -> str:
    return output_spec(City, native=False).instructions()


async def test_prompt_based_under_self_refine_the_judge_reads_the_callers_text(
    adapter: Adapter, jev: JudgeClient, jev_server: FakeJevServer
) -> None:
    adapter.script(BAD, GOOD)
    jev_server.answer = _judged_by_answer({BAD: 0.1, GOOD: 0.9})
    advisor = SelfRefineAdvisor(Judge(jev, [noul("is_right", IS_RIGHT)]), max_repeat_attempts=2)
    client = ChatClient(adapter.model, advisors=[advisor])

    city = await client.prompt(QUESTION).entity(City, native=False)

    assert city == City(name="Paris", population=2100000)
    first, retry = adapter.last_user_texts()
    assert first == QUESTION + _instructions()
    # The retry's feedback lands in the user message, and the instructions are still last.
    assert retry.startswith(QUESTION + "\n\n(An earlier answer")
    assert "Name the capital." in retry
    assert retry.endswith(_instructions())
    assert retry.count(FORMAT_INSTRUCTIONS_MARKER) == 1
    for body in adapter.bodies():
        assert "response_format" not in body
        assert "output_config" not in body
    # What the judge was sent: the caller's question, no schema, no feedback.
    states = [r.json["state"] for r in jev_server.requests]
    assert [s["user_question"] for s in states] == [f"user: {QUESTION}"] * 2
    assert [s["assistant_answer"] for s in states] == [BAD, GOOD]


async def test_native_under_self_refine_sends_the_schema_as_the_response_format(
    jev: JudgeClient, jev_server: FakeJevServer
) -> None:
    seen: list[Prompt] = []

    def answer(prompt: Prompt) -> str:
        seen.append(prompt)
        return BAD if len(seen) == 1 else GOOD

    jev_server.answer = _judged_by_answer({BAD: 0.1, GOOD: 0.9})
    advisor = SelfRefineAdvisor(Judge(jev, [noul("is_right", IS_RIGHT)]), max_repeat_attempts=1)
    client = ChatClient(FunctionModel(answer), advisors=[advisor])
    assert await client.prompt(QUESTION).entity(City) == City(name="Paris", population=2100000)
    for prompt in seen:
        assert prompt.options.response_format is not None
        assert prompt.options.response_format.schema == output_spec(City).schema
        assert prompt.output_spec is not None
        assert prompt.output_spec.native
        assert FORMAT_INSTRUCTIONS_MARKER not in prompt.messages[-1].text  # type: ignore[union-attr]


async def test_prompt_based_under_the_guardrail_screens_the_callers_text(
    adapter: Adapter, jev: JudgeClient, jev_server: FakeJevServer
) -> None:
    adapter.script(GOOD)
    jev_server.answer = lambda state, questions: dict.fromkeys(questions, 0.0)
    client = ChatClient(adapter.model, advisors=[GuardrailAdvisor(jev)])

    assert await client.prompt(QUESTION).entity(City, native=False) == City(
        name="Paris", population=2100000
    )

    screened = [r.json["state"]["text"] for r in jev_server.requests]
    assert screened == [QUESTION, GOOD]  # the input as written, then the answer
    assert adapter.last_user_texts() == [QUESTION + _instructions()]


async def test_self_refine_around_the_guardrail_both_see_the_callers_text(
    adapter: Adapter, jev: JudgeClient, jev_server: FakeJevServer
) -> None:
    adapter.script(BAD, GOOD)

    def answer(state: Any, questions: dict[str, Any]) -> dict[str, float]:
        if "text" in state:  # a guardrail screening: nothing hazardous
            return dict.fromkeys(questions, 0.0)
        return dict.fromkeys(questions, 0.9 if state["assistant_answer"] == GOOD else 0.1)

    jev_server.answer = answer
    refine = SelfRefineAdvisor(Judge(jev, [noul("is_right", IS_RIGHT)]), max_repeat_attempts=1)
    client = ChatClient(adapter.model, advisors=[refine, GuardrailAdvisor(jev)])

    assert await client.prompt(QUESTION).entity(City, native=False) == City(
        name="Paris", population=2100000
    )

    states = [r.json["state"] for r in jev_server.requests]
    screened = [s["text"] for s in states if "text" in s]
    assert screened == [QUESTION, BAD, GOOD]  # the input once, then each attempt's answer
    judged = [s["user_question"] for s in states if "user_question" in s]
    assert judged == [f"user: {QUESTION}"] * 2
    assert all(t.endswith(_instructions()) for t in adapter.last_user_texts())


async def test_a_guardrail_refusal_under_entity_is_a_structured_output_error(
    adapter: Adapter, jev: JudgeClient, jev_server: FakeJevServer
) -> None:
    adapter.script(GOOD)
    jev_server.answer = lambda state, questions: dict.fromkeys(
        questions, 0.99 if state["text"] == GOOD else 0.0
    )
    guard = GuardrailAdvisor(jev, output_hazards=[("city", "Does the `text` name a city?")])
    client = ChatClient(adapter.model, advisors=[guard])
    with pytest.raises(jr.StructuredOutputError) as info:
        await client.prompt(QUESTION).entity(City, native=False)
    assert info.value.raw_text == jr.advisors.guardrail.DEFAULT_REFUSAL


# -- memory and retrieval see what the caller wrote ---------------------------------------------


async def test_memory_keeps_the_callers_text_not_the_instructions() -> None:
    memory = InMemoryChatMemory()
    model = FunctionModel(lambda prompt: GOOD)
    client = ChatClient(model, advisors=[MessageChatMemoryAdvisor(memory)])
    await client.prompt(QUESTION).entity(City, native=False)
    await client.prompt("And of Italy?").entity(City, native=False)

    history = await memory.get("default")
    assert [m.text for m in history if isinstance(m, UserMessage)] == [QUESTION, "And of Italy?"]
    second = model.prompts[1].messages
    assert second[0].text == QUESTION  # type: ignore[union-attr]
    assert second[-1].text == "And of Italy?" + _instructions()  # type: ignore[union-attr]


async def test_the_retrieval_query_is_the_callers_text() -> None:
    queries: list[str] = []

    class Recording:
        async def retrieve(self, query: str, *, top_k: int | None = None) -> list[Document]:
            queries.append(query)
            return [Document("d1", "Paris is the capital of France.")]

    model = FunctionModel(lambda prompt: GOOD)
    client = ChatClient(model, advisors=[RetrievalAdvisor(Recording())])
    await client.prompt(QUESTION).entity(City, native=False)
    assert queries == [QUESTION]
    sent = model.prompts[0].messages[-1].text  # type: ignore[union-attr]
    assert "Paris is the capital of France." in sent
    assert sent.endswith(_instructions())


async def test_an_advisor_sees_the_spec_on_the_request_and_no_instructions_in_the_text() -> None:
    seen: list[ChatClientRequest] = []

    class Peek:
        name = "peek"
        order = 0

        async def advise_call(self, request: Any, chain: Any) -> Any:
            seen.append(request)
            return await chain.next_call(request)

    model = FunctionModel(lambda prompt: "[1, 2]")
    client = ChatClient(model, advisors=[Peek()])
    assert await client.prompt("numbers?").entity(list[int], native=False) == [1, 2]
    (request,) = seen
    assert request.prompt.messages[-1].text == "numbers?"  # type: ignore[union-attr]
    assert request.output_spec is not None
    assert request.output_spec.target == list[int]
    assert not request.output_spec.native
    assert request.copy(prompt=Prompt((UserMessage("x"),))).output_spec is request.output_spec
    sent = model.prompts[0]
    assert sent.output_spec is request.output_spec
    assert request.output_spec.without_instructions(sent.messages[-1].text) == "numbers?"  # type: ignore[union-attr]


def test_without_instructions_removes_only_its_own_rendering() -> None:
    spec = output_spec(City, native=False)
    block = spec.instructions()
    assert spec.without_instructions("hi" + block) == "hi"
    assert spec.without_instructions(block.lstrip()) == ""
    other = output_spec(list[int], native=False).instructions()
    assert spec.without_instructions("hi" + other) == "hi" + other
    assert output_spec(City).without_instructions("hi" + block) == "hi" + block  # native


async def test_entity_native_must_be_a_bool() -> None:
    model = FunctionModel(lambda prompt: GOOD)
    with pytest.raises(jr.UserError, match="native"):
        await ChatClient(model).prompt("x").entity(City, native="no")  # type: ignore[call-overload]
    assert model.prompts == []


# -- scalar targets (issue 20) ---------------------------------------------------------------


async def test_scalars_work_on_a_generating_model_both_ways() -> None:
    model = FunctionModel(lambda prompt: '{"result": 3}')
    client = ChatClient(model)
    assert await client.prompt("how many?").entity(int) == 3
    assert await client.prompt("how many?").entity(int, native=False) == 3
    assert model.prompts[0].options.response_format is not None


@pytest.fixture
async def jev_answers() -> AsyncIterator[FakeJevServer]:
    answers = {"urgent": 0.97, "team": "infra", "severity": 1.8}

    def answer(state: Any, questions: dict[str, Any]) -> dict[str, Any]:
        return {name: answers[name] for name in questions}

    async with FakeJevServer(answer) as server:
        yield server


@pytest.fixture
async def classifier_client(jev_answers: FakeJevServer) -> AsyncIterator[JudgeClient]:
    retry = RetryPolicy(max_retries=0, sleep=_no_sleep, jitter=0.0)
    async with JudgeClient("sk-jev-SECRET-8", base_url=jev_answers.base_url, retry=retry) as c:
        yield c


@pytest.mark.parametrize("native", [True, False])
async def test_a_jev_classifier_with_one_question_fills_a_scalar(
    classifier_client: JudgeClient, jev_answers: FakeJevServer, native: bool
) -> None:
    from jevrefine.jev import Choice
    from jevrefine.models import JevChatModel

    urgent = JevChatModel(classifier_client, questions={"urgent": Noul("Is it urgent?")})
    assert await ChatClient(urgent).prompt("Prod is down").entity(float, native=native) == 0.97
    team = JevChatModel(
        classifier_client,
        questions={"team": Choice("Which team?", options={"infra": "Servers", "billing": "Money"})},
    )
    assert await ChatClient(team).prompt("Prod is down").entity(str, native=native) == "infra"
    states = [r.json["state"] for r in jev_answers.requests]
    assert [s["messages"] for s in states] == [[{"role": "user", "content": "Prod is down"}]] * 2


async def test_a_scalar_the_answer_cannot_fit_names_the_type_to_pass(
    classifier_client: JudgeClient, jev_answers: FakeJevServer
) -> None:
    from jevrefine.models import JevChatModel

    urgent = JevChatModel(classifier_client, questions={"urgent": Noul("Is it urgent?")})
    with pytest.raises(jr.UserError, match=r"entity\(int\).*'urgent'.*entity\(float\)"):
        await ChatClient(urgent).prompt("Prod is down").entity(int)
    both = JevChatModel(
        classifier_client,
        questions={"urgent": Noul("Is it urgent?"), "severity": Noul("Is it severe?")},
    )
    with pytest.raises(jr.UserError, match=r"entity\(float\).*2 questions \(urgent, severity\)"):
        await ChatClient(both).prompt("Prod is down").entity(float, native=False)
    assert jev_answers.requests == []  # refused before any call


async def test_a_jev_classifier_reads_a_hand_set_response_format_as_before(
    classifier_client: JudgeClient,
) -> None:
    from jevrefine.models import JevChatModel

    model = JevChatModel(classifier_client, questions={"urgent": Noul("Is it urgent?")})
    schema = {"type": "object", "properties": {"urgent": {"type": "number"}}}
    prompt = Prompt(
        (UserMessage("Prod is down"),),
        ChatOptions(response_format=jr.ResponseFormat(schema=schema)),
    )
    response = await model.call(prompt)
    assert json.loads(response.text) == {"urgent": 0.97}


# -- typed accessors for what advisors leave in the context ------------------------------------


async def test_refine_report_of_a_response(jev: JudgeClient, jev_server: FakeJevServer) -> None:
    jev_server.answer = _judged_by_answer({"fine": 0.9})
    advisor = SelfRefineAdvisor(Judge(jev, [noul("is_right", IS_RIGHT)]))
    response = (
        await ChatClient(FunctionModel(lambda p: "fine"), advisors=[advisor]).prompt("q").call()
    )
    report = RefineReport.of(response)
    assert report is not None
    assert report.outcome == "passed"
    assert report is response.context[context_keys.REFINE_REPORT]  # the pinned key kept
    assert RefineReport.of(response.context) is report
    plain = await ChatClient(FunctionModel(lambda p: "fine")).prompt("q").call()
    assert RefineReport.of(plain) is None


def test_accessors_refuse_a_foreign_value_under_their_key() -> None:
    with pytest.raises(jr.UserError, match="holds a str, not a RefineReport"):
        RefineReport.of({context_keys.REFINE_REPORT: "passed"})
    with pytest.raises(jr.UserError, match="not one of PASS, REVIEW, BLOCK, SUPPORT"):
        GuardrailOutcome.of({context_keys.GUARDRAIL_OUTCOME: "NOPE"})
    with pytest.raises(jr.UserError, match="'input' or 'output'"):
        GuardrailAdvisor.screening_failure_of({context_keys.GUARDRAIL_SCREENING_FAILURE: "both"})
    with pytest.raises(jr.UserError, match="other than Documents"):
        RetrievalAdvisor.documents_of({context_keys.RETRIEVAL_DOCUMENTS: ["text"]})
    with pytest.raises(jr.UserError, match="pass the ChatClientResponse"):
        RefineReport.of(42)  # type: ignore[arg-type]


def test_accessors_read_the_pinned_keys() -> None:
    docs = [Document("d", "text")]
    context = {
        context_keys.GUARDRAIL_OUTCOME: "SUPPORT",
        context_keys.GUARDRAIL_SCREENING_FAILURE: "output",
        context_keys.RETRIEVAL_DOCUMENTS: docs,
        context_keys.TOOL_RETURN_DIRECT: True,
    }
    request = ChatClientRequest(Prompt((UserMessage("hi"),)), context=context)
    assert GuardrailOutcome.of(request) is GuardrailOutcome.SUPPORT
    assert GuardrailAdvisor.screening_failure_of(request) == "output"
    assert RetrievalAdvisor.documents_of(request) == docs
    response = jr.ChatClientResponse(jr.ChatResponse.of_text("x"), context)
    assert ToolCallingAdvisor.returned_direct(response)
    empty = jr.ChatClientResponse(jr.ChatResponse.of_text("x"), {})
    assert GuardrailOutcome.of(empty) is None
    assert GuardrailAdvisor.screening_failure_of(empty) is None
    assert RetrievalAdvisor.documents_of(empty) == []
    assert not ToolCallingAdvisor.returned_direct(empty)
