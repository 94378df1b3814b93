"""The providers the CLI can run on: one table of their facts, one way to pick and open one.

Every command (`demo`, `run`, `judge`, `eval`, `check-config`) resolves `--provider` and opens its
model here, so the order of the `auto` choice, the API key variables and the default model names
are written once. Offline, every command answers with `jevrefine.local.OFFLINE_MODEL` and judges
with `jevrefine.local.OFFLINE_JUDGE_MODEL` (a separate server: never the answering model judging
itself when they differ); the README, `docs/guide/cli.md` and `demo --help` are tested against
these two.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from ..local import OFFLINE_JUDGE_MODEL, OFFLINE_MODEL

if TYPE_CHECKING:
    from ..local import LocalModelServer
    from ..models.base import ChatModel

__all__ = [
    "CHOICES",
    "HOSTED",
    "JEV_KEY_ENV",
    "LOCAL_JUDGE_MODEL_ENV",
    "LOCAL_MODEL_ENV",
    "OFFLINE_JUDGE_MODEL",
    "OFFLINE_MODEL",
    "Provider",
    "ProviderFacts",
    "add_provider_flags",
    "is_local_model",
    "local_model_title",
    "model_identity",
    "offline_judge_model",
    "offline_model",
    "open_chat_model",
    "open_local_model",
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


LOCAL_MODEL_ENV: Final = "JEVREFINE_LOCAL_MODEL"
"""Overrides `OFFLINE_MODEL` (a known name or a GGUF path)."""

LOCAL_JUDGE_MODEL_ENV: Final = "JEVREFINE_LOCAL_JUDGE_MODEL"
"""Overrides `OFFLINE_JUDGE_MODEL` (a known name or a GGUF path)."""


def offline_model(name: str | None = None) -> str:
    """The local answering model: `name`, else `JEVREFINE_LOCAL_MODEL`, else `OFFLINE_MODEL`."""
    return name or os.environ.get(LOCAL_MODEL_ENV) or OFFLINE_MODEL


def offline_judge_model(name: str | None = None) -> str:
    """The local judge model: `name`, else `JEVREFINE_LOCAL_JUDGE_MODEL`, else the default."""
    return name or os.environ.get(LOCAL_JUDGE_MODEL_ENV) or OFFLINE_JUDGE_MODEL


def local_model_title(name: str) -> str:
    """`Qwen2.5-Coder-0.5B-Instruct (469 MiB)` for a known model name; the name itself else."""
    from ..local import KNOWN_MODELS

    known = KNOWN_MODELS.get(name)
    if known is None:
        return name
    title = known.description.split(",", 1)[0]
    return f"{title} ({known.size / 2**20:,.0f} MiB)"


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
    model, server = await open_local_model(stack, offline_model(name), ctx=ctx, parallel=parallel)
    return model, f"{server.alias} on the local llama.cpp server at {server.url} (no API key set)"


async def open_local_model(
    stack: contextlib.AsyncExitStack, name: str, *, ctx: int = 4096, parallel: int = 1
) -> tuple[ChatModel, LocalModelServer]:
    """Start a local server for `name` (a known model or a GGUF path) and its model, on `stack`."""
    from ..local import LocalModelServer

    server = await stack.enter_async_context(LocalModelServer(name, ctx=ctx, parallel=parallel))
    model = await stack.enter_async_context(server.openai_model())
    _IDENTITIES[model] = _local_identity(server, name)
    return model, server


_IDENTITIES: weakref.WeakKeyDictionary[ChatModel, str] = weakref.WeakKeyDictionary()
"""What each local model opened here is, beyond its alias (which two GGUF files may share)."""


def _local_identity(server: LocalModelServer, name: str) -> str:
    known = getattr(server, "known_model", None)  # a stand-in server may not say
    return _identity_of(known.name if known is not None else name)


def _identity_of(name: str) -> str:
    from ..local import KNOWN_MODELS

    known = KNOWN_MODELS.get(name)
    if known is not None:
        return f"local {known.name} sha256:{known.sha256}"
    path = os.path.abspath(os.path.expanduser(name))
    try:
        stat = os.stat(path)
    except OSError:
        return f"local {path}"
    return f"local {path} {stat.st_size} {stat.st_mtime_ns}"


def is_local_model(model: ChatModel, name: str) -> bool:
    """Whether `model` was opened here on the local model `name` (a known name or a path)."""
    return _IDENTITIES.get(model) == _identity_of(name)


def model_identity(model: ChatModel) -> str:
    """What makes `model` this model: for a local one its file, else provider, name and server."""
    known = _IDENTITIES.get(model)
    if known is not None:
        return known
    where = f"{model.server_address}:{model.server_port}" if model.server_address else ""
    return f"{model.provider} {model.model_name} {where}".strip()
