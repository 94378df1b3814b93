"""Client factories for the Ray actors (pickled by value into the workers)."""

from __future__ import annotations

import jevrefine as jr


class Exploder(jr.BaseAdvisor):
    """Fails the prompts that ask it to: a per-row failure."""

    name = "exploder"

    def before(self, request: jr.ChatClientRequest) -> jr.ChatClientRequest:
        if "explode" in request.prompt.messages[-1].text:
            raise ValueError("asked to explode")
        return request


async def openai_client(base_url: str) -> jr.ChatClient:
    """An async factory: an OpenAI-compatible model on the fake server, plus the exploder."""
    from jevrefine.models.openai import OpenAIChatModel

    model = OpenAIChatModel("fake-model", base_url=base_url, api_key="sk-test-not-a-secret")
    return jr.ChatClient(model, advisors=[Exploder()])
