"""jevrefine's pytest plugin: fake servers, scripted models, judged assertions, key markers.

Installed with jevrefine and loaded by pytest on its own (entry point `pytest11`); nothing to add
to a `conftest.py`.

```python
import pytest
from jevrefine.pytest import assert_answer


async def test_answers_the_capital(function_model, fake_jev) -> None:
    model = function_model("Paris is the capital of France.")
    answer = await ChatClient(model).prompt("Capital of France?").content()
    async with JudgeClient("test-key", base_url=fake_jev.base_url) as jev:
        await assert_answer(answer, "Does `assistant_answer` name Paris?", judge=jev,
                            question="Capital of France?")


@pytest.mark.needs_key("TYPESAFE_API_KEY")
async def test_against_the_real_service() -> None: ...
```

- fixtures `fake_openai`, `fake_anthropic`, `fake_jev`: a `FakeOpenAIServer`,
  `FakeAnthropicServer` or `FakeJevServer` started for the test and stopped after it (their
  `.requests` record what your code sent);
- fixture `function_model`: a factory, `function_model(fn)` -> a `FunctionModel` (also takes a
  reply text, or a list of replies given in turn);
- `await assert_answer(answer, *criteria, judge=...)`: judges the answer and fails the test with
  every criterion that did not pass, its detail and its probability;
- marker `needs_key("NAME", ...)`: skips the test, with the reason, unless every named
  environment variable is set.
"""

from __future__ import annotations

from ._assert import assert_answer as assert_answer
from ._fixtures import fake_anthropic as fake_anthropic
from ._fixtures import fake_jev as fake_jev
from ._fixtures import fake_openai as fake_openai
from ._fixtures import function_model as function_model
from ._needs_key import pytest_collection_modifyitems as pytest_collection_modifyitems
from ._needs_key import pytest_configure as pytest_configure

__all__ = [
    "assert_answer",
    "fake_anthropic",
    "fake_jev",
    "fake_openai",
    "function_model",
    "pytest_collection_modifyitems",
    "pytest_configure",
]
