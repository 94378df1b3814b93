"""The `jevrefine run` / `judge` / `check-config` settings: a TOML file, overridden by flags.

```toml
# jevrefine.toml
[model]
provider = "openai"          # auto | local | openai | anthropic
name = "gpt-4o-mini"
base_url = "http://127.0.0.1:8080/v1"   # any OpenAI-compatible server (optional)
system = "Answer in one sentence."
temperature = 0.2
max_tokens = 200

[judge]
kind = "rating"              # rating (a chat model rates 1-4) | jev (TypeSafe Jev) | none
provider = "anthropic"       # the rating judge's model; the answering model when left out
name = "claude-haiku-4-5"
success_rating = 3

[[judge.criteria]]           # kind = "jev": yes/no questions with a minimum P(yes)
name = "is_grounded"
question = "Is every claim in `assistant_answer` supported?"
when_false = "States something unsupported"
minimum = 0.7

[refine]
max_repeat_attempts = 2
token_budget = 4000

[run]
concurrency = 16
prompt_field = "prompt"
id_field = "id"
```

API keys come from the environment only (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
`TYPESAFE_API_KEY`); a config file never holds one, and nothing here prints one.
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pydantic

from .exceptions import UserError

if TYPE_CHECKING:
    from .jev.judge import Judge
    from .models.base import ChatModel

__all__ = ["CliConfig", "ConfigError", "load_config", "open_models"]

ProviderName = Literal["auto", "local", "openai", "anthropic"]

_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "jev": "TYPESAFE_API_KEY"}


class ConfigError(UserError):
    """The config file or a flag is invalid; the message says which setting and why."""


class _Section(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class ModelSection(_Section):
    """`[model]`: the model that answers."""

    provider: ProviderName = "auto"
    """`auto`: OpenAI or Anthropic when their key is set, else the local model."""
    name: str | None = None
    """The model name (for `local`, a GGUF path); the provider's default when unset."""
    base_url: str | None = None
    """An OpenAI- or Anthropic-compatible server."""
    system: str | None = None
    """The system message sent with every prompt."""
    temperature: float | None = pydantic.Field(default=None, ge=0, le=2)
    """Sampling temperature."""
    max_tokens: int | None = pydantic.Field(default=None, ge=1)
    """The longest answer, in tokens."""


class NoulCriterionSection(_Section):
    """One `[[judge.criteria]]` entry: a yes/no question for the Jev judge."""

    name: str
    """The criterion's (and question's) id."""
    question: str
    """The question, about `user_question` and `assistant_answer`."""
    when_false: str | None = None
    """The defect's wording, fed back to the model when the answer fails."""
    minimum: float = pydantic.Field(default=0.5, ge=0, le=1)
    """The least P(yes) that passes."""


class JudgeSection(_Section):
    """`[judge]`: what judges each answer."""

    kind: Literal["rating", "jev", "none"] = "rating"
    """`rating`: a chat model rates 1-4; `jev`: TypeSafe's Jev API; `none`: no refinement."""
    provider: ProviderName | None = None
    """The rating judge's provider; the answering model is reused when this and `name` are unset."""
    name: str | None = None
    """The rating judge's model, or the Jev model."""
    base_url: str | None = None
    """The rating judge's server, or the Jev API's."""
    success_rating: int = pydantic.Field(default=3, ge=1, le=4)
    """The least rating that passes (`rating`)."""
    criteria: tuple[NoulCriterionSection, ...] = ()
    """The questions asked (`jev`; at least one)."""

    @pydantic.model_validator(mode="after")
    def _jev_needs_criteria(self) -> JudgeSection:
        if self.kind == "jev" and not self.criteria:
            raise ValueError('kind = "jev" needs at least one [[judge.criteria]] entry')
        return self


class RefineSection(_Section):
    """`[refine]`: the self-refine loop."""

    max_repeat_attempts: int = pydantic.Field(default=2, ge=1, le=100)
    """Retries after the first attempt."""
    fail_on_exhausted_attempts: bool = False
    """Record an error rather than the best attempt when no attempt passes."""
    token_budget: int | None = pydantic.Field(default=None, ge=1)
    """Stop retrying once model and judge tokens reach this."""


class RunSection(_Section):
    """`[run]`: the batch."""

    concurrency: int = pydantic.Field(default=16, ge=1, le=10_000)
    """Refinements in flight at once."""
    prompt_field: str = "prompt"
    """The input field holding the prompt."""
    id_field: str = "id"
    """The input field holding the item's id (the line number when absent)."""


class CliConfig(_Section):
    """Every setting of the `run`, `judge` and `check-config` commands."""

    model: ModelSection = ModelSection()
    """The answering model."""
    judge: JudgeSection = JudgeSection()
    """The judge."""
    refine: RefineSection = RefineSection()
    """The refine loop."""
    run: RunSection = RunSection()
    """The batch."""

    def describe(self) -> dict[str, Any]:
        """The resolved settings, plus which API keys are set (never their values)."""
        described = self.model_dump(mode="json")
        described["model"]["provider"] = resolve_provider(self.model.provider)
        described["api_keys"] = {
            name: "set" if os.environ.get(var) else "not set" for name, var in _KEYS.items()
        }
        return described


def load_config(path: str | None, overrides: Mapping[str, Mapping[str, Any]]) -> CliConfig:
    """Read `path` (TOML, optional), apply the flags in `overrides` (`None` = not given), validate.

    Raises:
        ConfigError: the file is missing or not TOML, or a setting is invalid.
    """
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {path} not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    for section, values in overrides.items():
        given = {k: v for k, v in values.items() if v is not None}
        if given:
            current = data.get(section, {})
            if not isinstance(current, dict):
                raise ConfigError(f"[{section}] in the config file must be a table")
            data[section] = {**current, **given}
    try:
        return CliConfig.model_validate(data)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in exc.errors()
        )
        where = f" in {path}" if path else ""
        raise ConfigError(f"invalid setting{where}: {problems}") from None


def resolve_provider(requested: str) -> Literal["local", "openai", "anthropic"]:
    """The provider to use: the one requested, else the first whose API key is set, else local."""
    if requested == "openai":
        return "openai"
    if requested == "anthropic":
        return "anthropic"
    if requested == "local":
        return "local"
    if os.environ.get(_KEYS["openai"]):
        return "openai"
    if os.environ.get(_KEYS["anthropic"]):
        return "anthropic"
    return "local"


@dataclass(frozen=True, slots=True)
class Models:
    """What `open_models` yields: the answering model, the judge (if any), where they run."""

    model: ChatModel
    """The answering model."""
    judge: Judge | None
    """The judge; `None` when `[judge] kind = "none"`."""
    description: str
    """One line: provider and model name (no secrets)."""


@contextlib.asynccontextmanager
async def open_models(config: CliConfig) -> AsyncIterator[Models]:
    """Open the answering model and the judge for `config`; closes whatever it opened."""
    async with contextlib.AsyncExitStack() as stack:
        section = config.model
        model = await _open_model(stack, section.provider, section.name, section.base_url)
        judge: Judge | None = None
        spec = config.judge
        if spec.kind == "rating":
            from .jev.judge import rating_judge

            judge_model = model
            if spec.provider is not None or spec.name is not None or spec.base_url is not None:
                judge_model = await _open_model(
                    stack, spec.provider or section.provider, spec.name, spec.base_url
                )
            judge = rating_judge(judge_model, success_rating=spec.success_rating)
        elif spec.kind == "jev":
            from .jev import JudgeClient, Noul
            from .jev.criteria import noul
            from .jev.judge import Judge

            jev = await stack.enter_async_context(
                JudgeClient(base_url=spec.base_url, model=spec.name)
            )
            criteria = [
                noul(c.name, Noul(c.question, when_false=c.when_false), c.minimum)
                for c in spec.criteria
            ]
            judge = Judge(jev, criteria)
        yield Models(model, judge, f"{model.provider} {model.model_name}")


async def _open_model(
    stack: contextlib.AsyncExitStack, provider: str, name: str | None, base_url: str | None
) -> ChatModel:
    chosen = resolve_provider(provider)
    if chosen == "openai":
        from .models.openai import OpenAIChatModel

        return await stack.enter_async_context(
            OpenAIChatModel(name or "gpt-4o-mini", base_url=base_url)
        )
    if chosen == "anthropic":
        from .models.anthropic import AnthropicChatModel

        return await stack.enter_async_context(
            AnthropicChatModel(name or "claude-haiku-4-5", base_url=base_url)
        )
    from .local import LocalModelServer

    server = await stack.enter_async_context(LocalModelServer(name))
    return await stack.enter_async_context(server.openai_model())
