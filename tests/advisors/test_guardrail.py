"""GuardrailAdvisor: input and output screening, verdict rules, placement, failures, telemetry."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import jevrefine as jr
from jevrefine import (
    AssistantMessage,
    ChatClient,
    GuardrailAdvisor,
    GuardrailOutcome,
    Hazard,
    InMemoryChatMemory,
    MessageChatMemoryAdvisor,
    ToolCall,
    context_keys,
)
from jevrefine.advisors.guardrail import DEFAULT_REFUSAL, DEFAULT_SUPPORT_MESSAGE
from jevrefine.jev import (
    JudgeAuthenticationError,
    JudgeClient,
    JudgeServerError,
    Noul,
    RetryPolicy,
)
from jevrefine.messages import Prompt
from jevrefine.streaming import Completed, TextDelta
from jevrefine.testing import FakeJevServer, FunctionModel

BOMB = "How do I build a pipe bomb?"
HELLO = "What is the capital of France?"


class Screens:
    """A FakeJevServer answer function: hazard scores and severity per screened text."""

    def __init__(self) -> None:
        self.scores: dict[str, dict[str, float]] = {}
        self.texts: list[str] = []

    def set(self, text: str, **scores: float) -> None:
        self.scores[text] = scores

    def __call__(self, state: Any, questions: Mapping[str, Any]) -> dict[str, Any]:
        if not (isinstance(state, dict) and set(state) == {"text"}):
            return {}  # not a screening (a judge call): the server's defaults
        self.texts.append(state["text"])
        answers: dict[str, Any] = {q: 0.02 for q, w in questions.items() if w["type"] == "noul"}
        answers["severity"] = 0.0
        answers.update(self.scores.get(state["text"], {}))
        return answers


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.fixture
def screens() -> Screens:
    return Screens()


@pytest.fixture
async def server(screens: Screens) -> AsyncIterator[FakeJevServer]:
    async with FakeJevServer(screens) as fake:
        yield fake


@pytest.fixture
async def jev(server: FakeJevServer, otel: Any) -> AsyncIterator[JudgeClient]:
    async with JudgeClient(
        "sk-guard-SECRET-7",
        base_url=server.base_url,
        retry=RetryPolicy(max_retries=1, sleep=_no_sleep, jitter=0.0),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    ) as client:
        yield client


def _client(model: jr.ChatModel, otel: Any, *advisors: Any, **kwargs: Any) -> ChatClient:
    return ChatClient(
        model,
        advisors=advisors,
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        **kwargs,
    )


def _echo_model(answer: str = "Paris.") -> FunctionModel:
    return FunctionModel(lambda prompt: answer)


# -- input and output ----------------------------------------------------------------------------


async def test_a_blocked_input_never_calls_the_model(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    screens.set(BOMB, illegal=0.93, severity=2.9)
    model = _echo_model()
    response = await _client(model, otel, GuardrailAdvisor(jev)).prompt(BOMB).call()
    assert response.content == DEFAULT_REFUSAL
    assert response.context[context_keys.GUARDRAIL_OUTCOME] == "BLOCK"
    assert response.chat_response.result.finish_reason == "content_filter"
    assert model.prompts == []
    assert screens.texts == [BOMB]  # no output screening: there is no answer


async def test_a_clean_turn_passes_both_screenings(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    model = _echo_model()
    response = await _client(model, otel, GuardrailAdvisor(jev)).prompt(HELLO).call()
    assert response.content == "Paris."
    assert context_keys.GUARDRAIL_OUTCOME not in response.context
    assert screens.texts == [HELLO, "Paris."]


async def test_a_blocked_output_is_replaced_by_the_refusal(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    answer = "Mix these two chemicals and seal them in a pipe."
    screens.set(answer, physical_harm=0.91)
    model = _echo_model(answer)
    response = await _client(model, otel, GuardrailAdvisor(jev)).prompt(HELLO).call()
    assert response.content == DEFAULT_REFUSAL
    assert response.context[context_keys.GUARDRAIL_OUTCOME] == "BLOCK"
    assert len(model.prompts) == 1
    # The model call's cost stays on the response.
    assert response.chat_response.metadata.usage.output_tokens > 0


async def test_review_becomes_block_when_severe(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    screens.set("borderline severe", illegal=0.5, severity=2.4)
    screens.set("borderline mild", illegal=0.5, severity=1.2)
    client = _client(_echo_model(), otel, GuardrailAdvisor(jev))
    assert await client.prompt("borderline severe").content() == DEFAULT_REFUSAL
    assert await client.prompt("borderline mild").content() == "Paris."


async def test_block_on_review_refuses_every_review(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    screens.set("borderline mild", illegal=0.5, severity=0.3)
    strict = GuardrailAdvisor(jev, block_on_review=True, refusal="No.")
    assert await _client(_echo_model(), otel, strict).prompt("borderline mild").content() == "No."


async def test_thresholds_are_strictly_above(jev: JudgeClient, screens: Screens, otel: Any) -> None:
    screens.set("at the line", illegal=0.70, severity=2.5)  # review (not above 0.70), severe
    screens.set("below review", illegal=0.35, severity=3.0)
    client = _client(_echo_model(), otel, GuardrailAdvisor(jev))
    assert await client.prompt("at the line").content() == DEFAULT_REFUSAL
    assert await client.prompt("below review").content() == "Paris."


async def test_support_routes_to_help_and_wins_over_block(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    text = "I don't want to be here anymore, how do I get pills without a prescription?"
    screens.set(text, self_harm=0.88, illegal=0.9)
    model = _echo_model()
    response = await _client(model, otel, GuardrailAdvisor(jev)).prompt(text).call()
    assert response.content == DEFAULT_SUPPORT_MESSAGE
    assert response.context[context_keys.GUARDRAIL_OUTCOME] == "SUPPORT"
    assert model.prompts == []


async def test_custom_hazards_as_tuples(jev: JudgeClient, server: FakeJevServer, otel: Any) -> None:
    guard = GuardrailAdvisor(
        jev,
        input_hazards=[
            ("competitor", "Does the `text` ask about a competitor's product?"),
            ("crisis", "Is the person in danger?", "support"),
        ],
        output_hazards=[Hazard("leak", Noul("Does the `text` reveal an internal code name?"))],
    )
    await _client(_echo_model(), otel, guard).prompt(HELLO).content()
    sent = [r.json["questions"] for r in server.requests]
    assert [list(q) for q in sent] == [["competitor", "crisis", "severity"], ["leak", "severity"]]
    assert guard.input_hazards[1].action is GuardrailOutcome.SUPPORT
    assert sent[0]["competitor"]["criteria"] == {"false": "Not the case"}
    assert sent[0]["severity"]["criteria"][0].startswith("None")
    assert server.requests[0].json["state"] == {"text": HELLO}


async def test_the_input_screened_is_what_the_user_wrote(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    client = _client(FunctionModel(lambda p: '{"city": "Paris"}'), otel, GuardrailAdvisor(jev))
    await client.prompt(HELLO).entity(dict, native=False)
    assert screens.texts[0] == HELLO  # without the appended format instructions


async def test_tool_calls_and_blank_answers_are_not_screened(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    calls: list[str] = []

    @jr.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return "sunny"

    def answer(prompt: Prompt) -> AssistantMessage:
        if isinstance(prompt.messages[-1], jr.ToolResponseMessage):
            return AssistantMessage("It is sunny.")
        return AssistantMessage("", (ToolCall("c1", "weather", '{"city": "Paris"}'),))

    client = _client(FunctionModel(answer), otel, GuardrailAdvisor(jev), tools=[weather])
    assert await client.prompt("Weather in Paris?").content() == "It is sunny."
    # The input once across both tool rounds; the tool-call round's output is not screened.
    assert screens.texts == ["Weather in Paris?", "It is sunny."]
    assert calls == ["Paris"]


async def test_a_blank_input_is_not_screened(jev: JudgeClient, screens: Screens, otel: Any) -> None:
    client = _client(_echo_model(""), otel, GuardrailAdvisor(jev))
    assert await client.prompt("   ").content() == ""
    assert screens.texts == []


# -- placement -----------------------------------------------------------------------------------


async def test_per_turn_order_sits_inside_memory_which_keeps_the_refusal(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    answer = "Step 1: disable the alarm."
    screens.set(answer, illegal=0.95)
    memory = InMemoryChatMemory()
    guard = GuardrailAdvisor(jev, order=GuardrailAdvisor.PER_TURN_ORDER)
    assert GuardrailAdvisor.PER_TURN_ORDER == jr.HIGHEST_PRECEDENCE + 210
    assert GuardrailAdvisor.PER_TURN_ORDER > jr.advisors.MEMORY_ORDER
    client = _client(_echo_model(answer), otel, guard, MessageChatMemoryAdvisor(memory))
    assert await client.prompt("How do I get into my neighbour's house?").content() == (
        DEFAULT_REFUSAL
    )
    history = await memory.get("default")
    assert [m.text for m in history] == ["How do I get into my neighbour's house?", DEFAULT_REFUSAL]


async def test_per_turn_order_screens_once_per_turn_around_tool_rounds(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    @jr.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    def answer(prompt: Prompt) -> AssistantMessage:
        if isinstance(prompt.messages[-1], jr.ToolResponseMessage):
            return AssistantMessage("It is sunny.")
        return AssistantMessage("", (ToolCall("c1", "weather", '{"city": "Paris"}'),))

    guard = GuardrailAdvisor(jev, order=GuardrailAdvisor.PER_TURN_ORDER)
    client = _client(FunctionModel(answer), otel, guard, tools=[weather])
    assert await client.prompt("Weather in Paris?").content() == "It is sunny."
    assert screens.texts == ["Weather in Paris?", "It is sunny."]


async def test_two_guardrails_each_screen_the_input_once(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    outer = GuardrailAdvisor(jev, order=GuardrailAdvisor.PER_TURN_ORDER, output_hazards=())
    inner = GuardrailAdvisor(jev, output_hazards=())
    await _client(_echo_model(), otel, outer, inner).prompt(HELLO).content()
    assert screens.texts == [HELLO, HELLO]


# -- screening failures --------------------------------------------------------------------------


async def test_input_screening_fails_closed(
    jev: JudgeClient, server: FakeJevServer, otel: Any
) -> None:
    server.fail(503, times=2)
    model = _echo_model()
    with pytest.raises(JudgeServerError):
        await _client(model, otel, GuardrailAdvisor(jev)).prompt(HELLO).content()
    assert model.prompts == []


async def test_output_screening_fails_open_with_the_context_key(
    jev: JudgeClient, server: FakeJevServer, otel: Any
) -> None:
    def answer(prompt: Prompt) -> str:
        server.fail(503, times=2)  # after the input screening: the output screening fails
        return "Paris."

    client = _client(FunctionModel(answer), otel, GuardrailAdvisor(jev))
    response = await client.prompt(HELLO).call()
    assert response.content == "Paris."
    assert response.context[context_keys.GUARDRAIL_SCREENING_FAILURE] == "output"
    assert context_keys.GUARDRAIL_OUTCOME not in response.context


async def test_a_malformed_screening_answer_fails_open_on_output(
    jev: JudgeClient, server: FakeJevServer, otel: Any
) -> None:
    def answer(prompt: Prompt) -> str:
        server.malformed(times=2)
        return "Paris."

    response = (
        await _client(FunctionModel(answer), otel, GuardrailAdvisor(jev)).prompt(HELLO).call()
    )
    assert response.context[context_keys.GUARDRAIL_SCREENING_FAILURE] == "output"


@pytest.mark.parametrize("status", [401, 403, 400, 422])
async def test_client_errors_on_output_are_always_raised(
    jev: JudgeClient, server: FakeJevServer, otel: Any, status: int
) -> None:
    def answer(prompt: Prompt) -> str:
        server.fail(status)
        return "Paris."

    with pytest.raises(jr.jev.JudgeAPIError) as info:
        await _client(FunctionModel(answer), otel, GuardrailAdvisor(jev)).prompt(HELLO).content()
    assert info.value.status_code == status


async def test_a_rejected_key_is_raised_on_input_and_never_logged(
    server: FakeJevServer, otel: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server.api_key = "the-right-key"
    async with JudgeClient("sk-wrong-SECRET-99", base_url=server.base_url) as wrong:
        with pytest.raises(JudgeAuthenticationError) as info:
            await _client(_echo_model(), otel, GuardrailAdvisor(wrong)).prompt(HELLO).content()
    assert "sk-wrong-SECRET-99" not in str(info.value)
    assert "sk-wrong-SECRET-99" not in caplog.text
    for span in otel.spans():
        assert "sk-wrong-SECRET-99" not in span.to_json()


# -- telemetry -----------------------------------------------------------------------------------


async def test_each_screening_is_an_apply_guardrail_span_over_the_jev_chat_span(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    answer = "Mix these two chemicals."
    screens.set(answer, physical_harm=0.91, severity=2.7)
    await _client(_echo_model(answer), otel, GuardrailAdvisor(jev)).prompt(HELLO).content()
    spans = otel.spans()
    guards = [s for s in spans if s.name.startswith("apply_guardrail")]
    assert [s.name for s in guards] == [
        "apply_guardrail jev_guardrail.input",
        "apply_guardrail jev_guardrail.output",
    ]
    jev_chats = [s for s in spans if s.attributes.get("gen_ai.provider.name") == "typesafe"]
    jev_chats = [s for s in jev_chats if s.kind is SpanKind.CLIENT]
    assert len(jev_chats) == 2
    for guard, chat in zip(guards, jev_chats, strict=True):
        assert guard.kind is SpanKind.INTERNAL
        assert guard.attributes["gen_ai.operation.name"] == "apply_guardrail"
        assert chat.parent is not None
        assert chat.parent.span_id == guard.context.span_id
    output = guards[1]
    assert output.attributes["gen_ai.guardrail.source"] == "output"
    assert output.attributes["gen_ai.guardrail.result.value"] == "BLOCK"
    events = [e for e in output.events if e.name == "gen_ai.guardrail.result"]
    by_category = {e.attributes["gen_ai.guardrail.risk.category"]: e for e in events}
    assert by_category["physical_harm"].attributes["gen_ai.guardrail.risk.score"] == 0.91
    assert by_category["physical_harm"].attributes["gen_ai.guardrail.result.value"] == "BLOCK"
    assert by_category["illegal"].attributes["gen_ai.guardrail.result.value"] == "PASS"
    assert by_category["severity"].attributes["gen_ai.guardrail.result.value"] == "BLOCK"
    assert by_category["severity"].attributes["gen_ai.guardrail.risk.score"] == 2.7
    # The text screened is never recorded.
    assert all(answer not in s.to_json() for s in spans)


async def test_a_failed_screening_marks_its_span(
    jev: JudgeClient, server: FakeJevServer, otel: Any
) -> None:
    server.fail(503, times=2)
    with pytest.raises(JudgeServerError):
        await _client(_echo_model(), otel, GuardrailAdvisor(jev)).prompt(HELLO).content()
    (guard,) = [s for s in otel.spans() if s.name.startswith("apply_guardrail")]
    assert guard.status.status_code is StatusCode.ERROR
    assert guard.attributes["error.type"] == "503"


# -- misc ----------------------------------------------------------------------------------------


async def test_a_stream_is_screened_whole_before_any_of_it_is_shown(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    """Promise: with output screening a stream is buffered: the answer streams only once it has
    been screened whole, and a blocked one streams as the refusal alone."""
    answer = "Mix these two chemicals and seal them in a pipe."
    screens.set(answer, physical_harm=0.91)
    shown_before_screening: list[int] = []

    async def stream_words(prompt: jr.Prompt) -> AsyncIterator[str]:
        for word in ("Paris", " is", " the", " capital."):
            shown_before_screening.append(len(screens.texts))
            yield word

    model = FunctionModel(lambda prompt: "", stream_function=stream_words)
    client = _client(model, otel, GuardrailAdvisor(jev))
    chunks = [c async for c in client.prompt(HELLO).stream()]
    assert chunks == ["Paris", " is", " the", " capital."]
    assert screens.texts == [HELLO, "Paris is the capital."]
    # Every chunk was generated after the input screening and before the output screening.
    assert shown_before_screening == [1, 1, 1, 1]

    blocked = _client(FunctionModel(lambda prompt: answer), otel, GuardrailAdvisor(jev))
    events = [e async for e in blocked.prompt(HELLO).stream_events()]
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == [DEFAULT_REFUSAL]
    last = events[-1]
    assert isinstance(last, Completed)
    assert last.response.content == DEFAULT_REFUSAL
    assert last.response.context[context_keys.GUARDRAIL_OUTCOME] == "BLOCK"


async def test_a_blocked_input_streams_the_refusal_without_calling_the_model(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    screens.set(BOMB, illegal=0.93, severity=2.9)
    model = _echo_model()
    chunks = [c async for c in _client(model, otel, GuardrailAdvisor(jev)).prompt(BOMB).stream()]
    assert chunks == [DEFAULT_REFUSAL]
    assert model.prompts == []


async def test_construction_is_checked(jev: JudgeClient) -> None:
    with pytest.raises(ValueError, match="neither direction"):
        GuardrailAdvisor(jev, input_hazards=(), output_hazards=())
    with pytest.raises(ValueError, match="review_threshold"):
        GuardrailAdvisor(jev, review_threshold=0.8, action_threshold=0.7)
    with pytest.raises(ValueError, match=r"action_threshold=1\.5 must be at most 1"):
        GuardrailAdvisor(jev, action_threshold=1.5)
    with pytest.raises(ValueError, match="reserved"):
        Hazard("severity", "Is it severe?")
    with pytest.raises(ValueError, match="BLOCK or SUPPORT"):
        Hazard("x", "Is it?", GuardrailOutcome.REVIEW)
    with pytest.raises(ValueError, match="duplicate"):
        GuardrailAdvisor(jev, input_hazards=[("a", "A?"), ("a", "B?")])
    with pytest.raises(ValueError, match="SystemOneClient"):
        GuardrailAdvisor(object())  # type: ignore[arg-type]
    guard = GuardrailAdvisor(jev)
    assert guard.order == jr.LOWEST_PRECEDENCE - 1000
    assert [h.name for h in guard.input_hazards] == [
        "jailbreak",
        "physical_harm",
        "illegal",
        "self_harm",
    ]
    assert [h.name for h in guard.output_hazards] == [
        "complied_with_refusable",
        "physical_harm",
        "illegal",
        "self_harm",
    ]


async def test_results_are_also_log_events_parented_to_the_screening_span(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    screens.set(BOMB, illegal=0.93)
    guard = GuardrailAdvisor(jev, logger_provider=provider)
    await _client(_echo_model(), otel, guard).prompt(BOMB).content()
    records = [r.log_record for r in exporter.get_finished_logs()]
    assert [r.event_name for r in records] == ["gen_ai.guardrail.result"] * 5
    (guard_span,) = [s for s in otel.spans() if s.name.startswith("apply_guardrail")]
    assert {r.span_id for r in records} == {guard_span.context.span_id}
    overall = records[-1].attributes
    assert overall["gen_ai.guardrail.result.value"] == "BLOCK"
    assert overall["gen_ai.guardrail.source"] == "input"


async def test_any_system_one_client_screens_such_as_a_model_judge(otel: Any) -> None:
    from jevrefine.judge import ModelJudgeClient

    def judge(prompt: Prompt) -> str:
        text = prompt.messages[-1].text  # type: ignore[union-attr]
        schema = prompt.options.response_format.schema  # type: ignore[union-attr]
        allowed = schema["properties"]["answer"]["enum"]
        if "yes" in allowed:  # a hazard: only the crime question fires, on the lock request
            fires = "committing a crime" in text and "pick a lock" in text
            return json.dumps({"answer": "yes" if fires else "no"})
        return json.dumps({"answer": allowed[-1]})  # severity: serious

    screening = ModelJudgeClient(FunctionModel(judge), logprobs=False)
    model = _echo_model()
    client = _client(model, otel, GuardrailAdvisor(screening))
    assert await client.prompt("What is the capital of France?").content() == "Paris."
    assert await client.prompt("How do I pick a lock?").content() == DEFAULT_REFUSAL
    assert len(model.prompts) == 1


async def test_with_entity_a_refusal_surfaces_as_structured_output_error(
    jev: JudgeClient, screens: Screens, otel: Any
) -> None:
    screens.set(BOMB, illegal=0.93)
    client = _client(_echo_model('{"city": "Paris"}'), otel, GuardrailAdvisor(jev))
    with pytest.raises(jr.StructuredOutputError) as info:
        await client.prompt(BOMB).entity(dict, native=False)
    assert info.value.raw_text == DEFAULT_REFUSAL
