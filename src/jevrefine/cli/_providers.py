"""The providers the CLI can run on: one table of their facts, one way to pick and open one.

Every command (`demo`, `run`, `judge`, `eval`, `check-config`) resolves `--provider` and opens its
model here, so the order of the `auto` choice, the API key variables and the default model names
are written once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from ..models.base import ChatModel

__all__ = [
    "CHOICES",
    "HOSTED",
    "JEV_KEY_ENV",
    "Provider",
    "ProviderFacts",
    "add_provider_flags",
    "open_chat_model",
    "resolve_provider",
]

Provider = Literal["local", "openai", "anthropic"]
"""A provider after `auto` is resolved."""


@dataclass(frozen=True, slots=True)
class ProviderFacts:
    """What the CLI needs to know of a hosted provider."""

    label: str
    """The provider's name in messages (`OpenAI`)."""
    key_env: str
    """The environment variable that holds its API key."""
    default_model: str
    """The model asked when `--model` / `[model] name` is not given."""


HOSTED: Final[dict[str, ProviderFacts]] = {
    # In the order `auto` tries them: the first whose key is set wins.
    "openai": ProviderFacts("OpenAI", "OPENAI_API_KEY", "gpt-4o-mini"),
    "anthropic": ProviderFacts("Anthropic", "ANTHROPIC_API_KEY", "claude-haiku-4-5"),
}
"""The hosted providers; `local` (llama.cpp, started by the CLI) needs no key."""

CHOICES: Final = ("auto", "local", *HOSTED)
"""What `--provider` (and `--judge-provider`) accept."""

JEV_KEY_ENV: Final = "TYPESAFE_API_KEY"
"""The environment variable of the Jev judge's API key."""


def add_provider_flags(
    parser: argparse.ArgumentParser,
    *,
    prefix: str = "",
    default: str | None = None,
    provider_help: str,
    model_help: str,
) -> None:
    """`--{prefix}provider` (one of `CHOICES`) and `--{prefix}model`: which model, from whom.

    `default=None` leaves a flag not given to the config file (the batch commands); the demo,
    which reads no config, passes `"auto"`.
    """
    parser.add_argument(f"--{prefix}provider", choices=CHOICES, default=default, help=provider_help)
    parser.add_argument(f"--{prefix}model", help=model_help)


def resolve_provider(requested: str) -> Provider:
    """The provider to use: the one requested, else the first whose API key is set, else local."""
    if requested in ("local", "openai", "anthropic"):
        return requested  # type: ignore[return-value]  # checked just above
    for name, facts in HOSTED.items():
        if os.environ.get(facts.key_env):
            return name  # type: ignore[return-value]  # HOSTED's keys are providers
    return "local"


async def open_chat_model(
    stack: contextlib.AsyncExitStack,
    provider: Provider,
    name: str | None,
    *,
    base_url: str | None = None,
    ctx: int = 4096,
    parallel: int = 1,
) -> tuple[ChatModel, str]:
    """Open `provider`'s model on `stack` (which closes it); also says where it runs.

    `name` defaults to the provider's `default_model` (the local server's default model for
    `local`); `ctx` and `parallel` size the local server and are ignored otherwise.
    """
    if provider == "openai":
        from ..models.openai import OpenAIChatModel

        model: ChatModel = await stack.enter_async_context(
            OpenAIChatModel(name or HOSTED[provider].default_model, base_url=base_url)
        )
        return model, f"OpenAI {model.model_name}"
    if provider == "anthropic":
        from ..models.anthropic import AnthropicChatModel

        model = await stack.enter_async_context(
            AnthropicChatModel(name or HOSTED[provider].default_model, base_url=base_url)
        )
        return model, f"Anthropic {model.model_name}"
    from ..local import LocalModelServer

    server = await stack.enter_async_context(LocalModelServer(name, ctx=ctx, parallel=parallel))
    model = await stack.enter_async_context(server.openai_model())
    return model, f"{server.alias} on the local llama.cpp server at {server.url} (no API key set)"
