"""The plugin's fixtures: fake servers per test, and a factory of scripted models."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from ..exceptions import UserError
from ..testing import FunctionModel

if TYPE_CHECKING:
    from ..messages import Prompt
    from ..testing._anthropic_server import FakeAnthropicServer
    from ..testing._function_model import ModelFunction, StreamFunction
    from ..testing._jev_server import FakeJevServer
    from ..testing._openai_server import FakeOpenAIServer

__all__ = [
    "FunctionModelFactory",
    "fake_anthropic",
    "fake_jev",
    "fake_openai",
    "function_model",
    "scripted",
]


# Sync fixtures on purpose: the servers run on their own thread, so these work the same under
# anyio's plugin, pytest-asyncio, or in plain sync tests.
@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A `FakeOpenAIServer` on 127.0.0.1, started for this test and stopped after it.

    Point `OpenAIChatModel(base_url=fake_openai.base_url)` (or any OpenAI client) at it;
    `script(...)` queues answers, `chat_requests` holds what was sent.
    """
    from ..testing import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    """A `FakeAnthropicServer` on 127.0.0.1, started for this test and stopped after it."""
    from ..testing import FakeAnthropicServer

    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def fake_jev() -> Iterator[FakeJevServer]:
    """A `FakeJevServer` on 127.0.0.1, started for this test and stopped after it.

    Its answers are the deterministic defaults until the test sets `fake_jev.answer`, a function
    `(state, questions) -> {question id: value}`.
    """
    from ..testing import FakeJevServer

    with FakeJevServer() as server:
        yield server


class FunctionModelFactory(Protocol):
    """What the `function_model` fixture returns: builds a `FunctionModel`."""

    def __call__(
        self,
        function: ModelFunction | str | Sequence[str],
        *,
        stream_function: StreamFunction | None = None,
        model_name: str = "function",
    ) -> FunctionModel:
        """A model answering with `function`, always with a text, or with each text in turn."""
        ...


def scripted(replies: str | Sequence[str]) -> Callable[[Prompt], str]:
    """A model function answering with `replies`: one text always, or each text once, in turn.

    Raises:
        UserError: the list is empty or holds something other than text; when called after
            the last reply, naming how many there were.
    """
    if isinstance(replies, str):
        text = replies
        return lambda prompt: text
    script = list(replies) if isinstance(replies, Sequence) else []
    if not script or not all(isinstance(reply, str) for reply in script):
        raise UserError(
            "function_model takes a function, a reply text, or a non-empty list of reply texts; "
            f"got {script!r}"
        )
    given: list[str] = []

    def reply(prompt: Prompt) -> str:
        if len(given) == len(script):
            raise UserError(
                f"function_model was called {len(script) + 1} times but scripted only "
                f"{len(script)} replies; add more replies or pass a function"
            )
        given.append(script[len(given)])
        return given[-1]

    return reply


@pytest.fixture
def function_model() -> FunctionModelFactory:
    """A factory: `function_model(fn)` -> `FunctionModel(fn)`.

    `fn` is a function of the `Prompt` (sync or async), a reply text answered every time, or a
    list of reply texts answered in turn (one more call is a `UserError`).
    """

    def make(
        function: ModelFunction | str | Sequence[str],
        *,
        stream_function: StreamFunction | None = None,
        model_name: str = "function",
    ) -> FunctionModel:
        answer: Any = function if callable(function) else scripted(function)
        return FunctionModel(answer, stream_function=stream_function, model_name=model_name)

    return make
