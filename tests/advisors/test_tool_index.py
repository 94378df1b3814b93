"""`ToolIndex`: an advisor offering the model only the tools Jev finds applicable.

Behaviour and defaults follow the seed library's docs/toolsearch/JevToolIndex.md
(spring-ai-community/spring-ai-typesafe). The judge is a real loopback `FakeJevServer`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import jevrefine as jr
from jevrefine.advisors import ToolIndex
from jevrefine.advisors.tool_calling import TOOL_CALLING_ORDER
from jevrefine.advisors.tool_index import TOOL_INDEX_KEY, TOOL_INDEX_ORDER
from jevrefine.exceptions import UserError
from jevrefine.jev import JudgeClient
from jevrefine.judge import ToolSelection
from jevrefine.judge.tool_selection import ANY_TOOL_QUESTION_ID, TOOL_QUESTION_ID
from jevrefine.messages import AssistantMessage, Prompt, ToolCall
from jevrefine.testing import FakeJevServer, FunctionModel


@jr.tool
def current_weather(place: str) -> str:
    """Returns the current temperature and conditions for a named place."""
    return f"{place}: 4 °C, windy"


@jr.tool
def send_email(to: str, body: str) -> str:
    """Sends an email message to one or more recipients."""
    return "sent"


@jr.tool
def create_invoice(customer: str) -> str:
    """Creates an invoice for a customer."""
    return "invoice 17"


TOOLS = [current_weather, send_email, create_invoice]


# What a judge might answer, per request: the choice's distribution and P(any tool applies).
def _route(weather: float, email: float, invoice: float, applies: float):
    return {"current_weather": weather, "send_email": email, "create_invoice": invoice}, applies


ROUTES = {
    "is it chilly outside in Oslo": _route(0.9, 0.1, 0.0, 0.97),
    "bill Acme Corp for last month": _route(0.0, 0.04, 0.96, 0.9),
    "what is the capital of Peru": _route(0.5, 0.3, 0.2, 0.08),
}


def _judge(state: Any, questions: dict[str, Any]) -> dict[str, Any]:
    distribution, applies = ROUTES[state["user_request"]]
    answers: dict[str, Any] = {ANY_TOOL_QUESTION_ID: applies}
    if TOOL_QUESTION_ID in questions:
        best = max(distribution, key=lambda k: distribution[k])
        answers[TOOL_QUESTION_ID] = {
            "type": "choice", "choice": best, "probabilities": distribution
        }  # fmt: skip
    return answers


@pytest.fixture
async def jev() -> AsyncIterator[tuple[FakeJevServer, JudgeClient]]:
    async with FakeJevServer(_judge) as server, JudgeClient("k", base_url=server.base_url) as c:
        yield server, c


def _offered(prompt: Prompt) -> list[str]:
    return [t.name for t in prompt.options.tools or ()]


async def test_the_model_is_offered_only_the_applicable_tools_ranked(jev) -> None:
    """JevToolIndex.md: each match's relevance is its share of the choice, descending; a tool
    Jev gave no probability is left out; both questions ride in one request."""
    server, client = jev
    model = FunctionModel(lambda prompt: "ok")
    chat = jr.ChatClient(model, tools=TOOLS, advisors=[ToolIndex(client)])
    response = await chat.prompt("is it chilly outside in Oslo").call()
    assert _offered(model.prompts[0]) == ["current_weather", "send_email"]
    selection = response.context[TOOL_INDEX_KEY]
    assert isinstance(selection, ToolSelection)
    assert [(m.name, m.relevance) for m in selection.matches] == [
        ("current_weather", 0.9), ("send_email", 0.1)]  # fmt: skip
    assert selection.applicability == 0.97
    (sent,) = server.requests
    assert sorted(sent.json["questions"]) == [ANY_TOOL_QUESTION_ID, TOOL_QUESTION_ID]
    assert sent.json["state"]["user_request"] == "is it chilly outside in Oslo"
    assert [t["name"] for t in sent.json["state"]["tools"]] == [t.name for t in TOOLS]
    options = sent.json["questions"][TOOL_QUESTION_ID]["criteria"]
    assert "temperature and conditions" in str(options)


async def test_no_tool_is_offered_when_none_applies(jev) -> None:
    """JevToolIndex.md: below the applicability threshold (0.5) the result is empty, and the
    model is told about no tools instead of a plausible wrong one."""
    _, client = jev
    model = FunctionModel(lambda prompt: "Lima.")
    chat = jr.ChatClient(model, tools=TOOLS, advisors=[ToolIndex(client)])
    response = await chat.prompt("what is the capital of Peru").call()
    assert _offered(model.prompts[0]) == []
    assert response.context[TOOL_INDEX_KEY].matches == ()
    strict = ToolIndex(client, applicability_threshold=0.95)
    assert (await strict.select("bill Acme Corp for last month", TOOLS)).names == []
    lenient = ToolIndex(client, applicability_threshold=0.05)
    assert (await lenient.select("what is the capital of Peru", TOOLS)).names == [
        "current_weather", "send_email", "create_invoice"]  # fmt: skip


async def test_minimum_relevance_and_max_tools(jev) -> None:
    """JevToolIndex.md: minimumRelevance drops tools below that share; at zero, every tool Jev
    gives any probability is returned in ranked order, a tool at exactly zero never is."""
    _, client = jev
    assert (await ToolIndex(client).select("bill Acme Corp for last month", TOOLS)).names == [
        "create_invoice", "send_email"]  # fmt: skip
    picky = ToolIndex(client, minimum_relevance=0.2)
    assert (await picky.select("bill Acme Corp for last month", TOOLS)).names == ["create_invoice"]
    none_reach = ToolIndex(client, minimum_relevance=0.99)
    assert (await none_reach.select("bill Acme Corp for last month", TOOLS)).names == []
    one = ToolIndex(client, max_tools=1)
    assert (await one.select("is it chilly outside in Oslo", TOOLS)).names == ["current_weather"]


async def test_one_judging_call_per_request_across_tool_rounds(jev) -> None:
    """One Jev call per request however many tools and tool rounds: the index sits outside the
    tool loop, which sees (and can run) only the selected tools."""
    server, client = jev
    assert TOOL_INDEX_ORDER < TOOL_CALLING_ORDER

    def model_turn(prompt: Prompt) -> AssistantMessage | str:
        if len(prompt.messages) == 1:
            return AssistantMessage("", (ToolCall("c1", "current_weather", '{"place": "Oslo"}'),))
        return "It is 4 °C and windy in Oslo."

    model = FunctionModel(model_turn)
    chat = jr.ChatClient(model, tools=TOOLS, advisors=[ToolIndex(client)])
    assert await chat.prompt("is it chilly outside in Oslo").content() == (
        "It is 4 °C and windy in Oslo."
    )
    assert len(model.prompts) == 2
    assert [_offered(p) for p in model.prompts] == [["current_weather", "send_email"]] * 2
    assert len(server.requests) == 1


async def test_a_single_tool_is_asked_only_whether_it_applies(jev) -> None:
    """JevToolIndex.md: a session holding exactly one tool skips the choice and asks only
    whether that tool applies."""
    server, client = jev
    selection = await ToolIndex(client).select("is it chilly outside in Oslo", [current_weather])
    assert [(m.name, m.relevance) for m in selection.matches] == [("current_weather", 0.97)]
    assert list(server.requests[0].json["questions"]) == [ANY_TOOL_QUESTION_ID]
    none = await ToolIndex(client).select("what is the capital of Peru", [current_weather])
    assert none.names == []


async def test_nothing_to_decide_makes_no_call(jev) -> None:
    """JevToolIndex.md: an empty session returns an empty result without a call."""
    server, client = jev
    index = ToolIndex(client)
    assert await index.select("anything", []) == ToolSelection((), None, asked=False)
    model = FunctionModel(lambda prompt: "hi")
    await jr.ChatClient(model, advisors=[index]).prompt("is it chilly outside in Oslo").content()
    chat = jr.ChatClient(model, tools=TOOLS, advisors=[index])
    await chat.prompt().messages(AssistantMessage("Nothing asked yet.")).content()
    assert _offered(model.prompts[1]) == [t.name for t in TOOLS]  # nothing to decide on
    assert server.requests == []


async def test_streams_are_narrowed_too(jev) -> None:
    _, client = jev
    model = FunctionModel(lambda prompt: "Chilly.")
    chat = jr.ChatClient(model, tools=TOOLS, advisors=[ToolIndex(client)])
    chunks = [c async for c in chat.prompt("bill Acme Corp for last month").stream()]
    assert "".join(chunks) == "Chilly."
    assert _offered(model.prompts[0]) == ["create_invoice", "send_email"]


async def test_too_many_tools_and_bad_settings_are_refused(jev) -> None:
    server, client = jev
    many = [jr.tool(name=f"t{i}", description=f"tool {i}")(lambda: "x") for i in range(256)]
    with pytest.raises(UserError, match="at most 255: narrow them first with a cheap index"):
        await ToolIndex(client).select("anything", many)
    assert server.requests == []
    for kwargs, message in [
        ({"applicability_threshold": 1.5}, "applicability_threshold=1.5"),
        ({"minimum_relevance": -1}, "minimum_relevance=-1"),
        ({"max_tools": 0}, "max_tools=0"),
    ]:
        with pytest.raises(UserError, match=message):
            ToolIndex(client, **kwargs)
    with pytest.raises(UserError, match="ToolIndex needs a SystemOneClient"):
        ToolIndex("jev")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("jevrefine.judge", "ToolIndex"),
        ("jevrefine.judge.tool_index", "ToolIndex"),
        ("jevrefine.judge.tool_index", "TOOL_INDEX_ORDER"),
        ("jevrefine.judge.tool_index", "TOOL_INDEX_KEY"),
    ],
)
def test_the_judges_old_paths_still_work_and_warn_with_the_new_one(module: str, name: str) -> None:
    """`jevrefine.judge.ToolIndex` was pinned: it moved to the chain, the old path warns."""
    import importlib

    from jevrefine.advisors import tool_index

    old = importlib.import_module(module)
    with pytest.warns(
        DeprecationWarning, match=f"from jevrefine.advisors.tool_index import {name}"
    ):
        moved = getattr(old, name)
    assert moved is getattr(tool_index, name)


def test_the_judges_old_module_keeps_the_judging_names_without_a_warning() -> None:
    import warnings

    from jevrefine.judge import tool_index, tool_selection

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tool_index.ToolSelection is tool_selection.ToolSelection
        assert tool_index.ANY_TOOL_QUESTION_ID == ANY_TOOL_QUESTION_ID
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        tool_index.Nothing  # noqa: B018 - a name that never was there is no deprecation
