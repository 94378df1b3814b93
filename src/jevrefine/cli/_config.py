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
kind = "jev"                 # rating (a chat model rates 1-4) | jev (TypeSafe Jev) | model | none
min_confidence = 0.6         # a choice or score with less support is INCONCLUSIVE

[[judge.criteria]]           # kind = "jev" or "model": the Judge's criteria, in order
kind = "check"               # a code check on the answer, run locally: never sent
name = "short_enough"
max_length = 800
must_not_contain = ["As an AI"]

[[judge.criteria]]
kind = "noul"                # yes/no, passes when P(yes) >= minimum (the default kind)
name = "is_grounded"
question = "Is every claim in `assistant_answer` supported?"
when_false = "States something unsupported"
minimum = 0.7

[[judge.criteria]]
kind = "score"               # a rubric, lowest level first; passes at level >= minimum
name = "helpfulness"
question = "How helpful is `assistant_answer`?"
levels = ["useless", "partial", "helpful"]
minimum = 1

[[judge.criteria]]
kind = "choice"              # one label of several; passes on an accepted label
name = "tone"
question = "What is the tone of `assistant_answer`?"
options = ["polite", "neutral", "rude"]
accept = ["polite", "neutral"]

[refine]
max_repeat_attempts = 2
token_budget = 4000

[run]
concurrency = 16
prompt_field = "prompt"
id_field = "id"
```

A mistake is a `ConfigError` naming the key (`judge.criteria[3].accept: ...`) and what to pass
instead; `jevrefine check-config` reports it before anything runs. A predicate of your own
(`check(...)` with a function, `applies_when=`) has no TOML form: build that `Judge` in Python.

API keys come from the environment only (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
`TYPESAFE_API_KEY`); a config file never holds one, and nothing here prints one.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import sys
import tomllib
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeAlias

import pydantic

from .._http._headers import redact_url
from ..exceptions import UserError
from ..jev.errors import JudgeUsageError
from ._providers import (
    HOSTED,
    JEV_KEY_ENV,
    offline_judge_model,
    offline_model,
    open_chat_model,
    open_local_model,
    resolve_provider,
)

if TYPE_CHECKING:
    from ..jev.protocol import SystemOneClient
    from ..judge._judge import Judge, JudgeInput
    from ..judge.criteria import Criterion
    from ..models.base import ChatModel

__all__ = [
    "LOCAL_CONCURRENCY",
    "LOCAL_MAX_SLOTS",
    "LOCAL_MAX_TOKENS",
    "LOCAL_SLOT_CONTEXT",
    "CliConfig",
    "ConfigError",
    "load_config",
    "missing_key",
    "open_models",
]

ProviderName = Literal["auto", "local", "openai", "anthropic"]

_KEYS = {**{name: facts.key_env for name, facts in HOSTED.items()}, "jev": JEV_KEY_ENV}

LOCAL_MAX_TOKENS = 256
"""`max_tokens` on the local model when none is set. Without a cap the small model can ramble
until its context is full, and the judge's prompt (or the retry) quoting that answer then no
longer fits: "request (4316 tokens) exceeds the available context size (4096 tokens)"."""

LOCAL_CONCURRENCY = 2
"""Items in flight on the local model when `--concurrency` is not given. The local server gets
one slot per item in flight: more items than slots would only queue inside the server, with no
item finishing sooner (the progress bar sat at 0/4 while 16 requests shared one slot)."""

LOCAL_MAX_SLOTS = 8
"""The most llama.cpp slots the CLI starts (each holds `LOCAL_SLOT_CONTEXT` tokens of cache);
a larger `--concurrency` on the local model is lowered to this."""

LOCAL_SLOT_CONTEXT = 4096
"""Context tokens per local slot: llama.cpp splits `ctx` evenly between its slots."""


class ConfigError(UserError):
    """The config file or a flag is invalid; the message says which setting, why, and the fix.

    Args:
        message: what is wrong and what to pass instead.
        key: the first wrong setting's key path, e.g. `judge.criteria[2].accept` (`None` when
            the problem is not one key's, e.g. a missing file).
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        """The wrong setting's key path, or `None`."""


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


class WhenChosenSection(_Section):
    """`when_chosen = {criterion = "tone", labels = ["rude"]}`: count only after that choice."""

    criterion: str
    """An earlier choice criterion's name."""
    labels: tuple[str, ...] = pydantic.Field(min_length=1)
    """The labels it must have chosen."""


class _QuestionSection(_Section):
    name: str = pydantic.Field(min_length=1)
    """The criterion's (and question's) id; unique within the judge."""
    question: str = pydantic.Field(min_length=1)
    """The question, about `user_question` and `assistant_answer`."""
    when_passed: str | None = None
    """Count this criterion only when this earlier criterion passed."""
    when_chosen: WhenChosenSection | None = None
    """Count this criterion only when an earlier choice chose one of some labels."""


class NoulCriterionSection(_QuestionSection):
    """`kind = "noul"` (the default): a yes/no question, passing when P(yes) >= `minimum`."""

    kind: Literal["noul"] = "noul"
    """The criterion kind."""
    when_true: str | None = None
    """What a "yes" looks like."""
    when_false: str | None = None
    """The defect's wording, fed back to the model when the answer fails."""
    minimum: float = pydantic.Field(default=0.5, ge=0, le=1)
    """The least P(yes) that passes."""


class ScoreCriterionSection(_QuestionSection):
    """`kind = "score"`: a rubric, passing when most of the mass is on levels >= `minimum`."""

    kind: Literal["score"]
    """The criterion kind."""
    levels: tuple[str, ...]
    """The rubric, 2 to 10 levels, lowest first (level index = position)."""
    minimum: float = pydantic.Field(ge=0)
    """The least level that passes, 0 to `len(levels) - 1` (may fall between levels)."""


class ChoiceCriterionSection(_QuestionSection):
    """`kind = "choice"`: one label of several, passing when most mass is on `accept`ed labels."""

    kind: Literal["choice"]
    """The criterion kind."""
    options: tuple[str, ...] | dict[str, str]
    """The labels (a list), or a table of label = description."""
    accept: tuple[str, ...] = pydantic.Field(min_length=1)
    """The labels that pass; each one of `options`."""


class CheckCriterionSection(_Section):
    """`kind = "check"`: a code check on the answer's text, run locally and never sent.

    Every test given must hold: `max_length`, `min_length` (characters), `pattern` (a regular
    expression found somewhere in the answer), `must_contain` (every one of these texts),
    `must_not_contain` (none of them).
    """

    kind: Literal["check"]
    """The criterion kind."""
    name: str = pydantic.Field(min_length=1)
    """Unique within the judge."""
    defect: str | None = None
    """The feedback when the check fails; by default, the tests spelled out."""
    max_length: int | None = pydantic.Field(default=None, ge=1)
    """The most characters the answer may have."""
    min_length: int | None = pydantic.Field(default=None, ge=1)
    """The fewest characters the answer may have."""
    pattern: str | None = None
    """A regular expression (Python `re`) the answer must contain a match of."""
    must_contain: tuple[str, ...] = ()
    """Texts the answer must contain, every one."""
    must_not_contain: tuple[str, ...] = ()
    """Texts the answer must not contain."""
    ignore_case: bool = False
    """Compare `pattern`, `must_contain` and `must_not_contain` case-insensitively."""


def _criterion_kind(value: Any) -> str | None:
    if isinstance(value, Mapping):
        kind = value.get("kind", "noul")
        return kind if isinstance(kind, str) else None
    return getattr(value, "kind", None)


CRITERION_KINDS: dict[str, type[_Section]] = {
    "noul": NoulCriterionSection,
    "score": ScoreCriterionSection,
    "choice": ChoiceCriterionSection,
    "check": CheckCriterionSection,
}

CriterionSection: TypeAlias = Annotated[
    Annotated[NoulCriterionSection, pydantic.Tag("noul")]
    | Annotated[ScoreCriterionSection, pydantic.Tag("score")]
    | Annotated[ChoiceCriterionSection, pydantic.Tag("choice")]
    | Annotated[CheckCriterionSection, pydantic.Tag("check")],
    pydantic.Discriminator(
        _criterion_kind,
        custom_error_type="criterion_kind",
        custom_error_message='kind must be "noul" (the default), "score", "choice" or "check"',
    ),
]
"""One `[[judge.criteria]]` entry, by its `kind`."""


class EscalateSection(_Section):
    """`[judge.escalate]`: a stronger judge for the criteria the first one was unsure about."""

    kind: Literal["jev", "model"] = "jev"
    """`jev`: TypeSafe's Jev API (e.g. a stronger Jev model); `model`: a chat model."""
    provider: ProviderName | None = None
    """The stronger chat model's provider (`model`; default: the answering model's)."""
    name: str | None = None
    """The stronger chat model, or the Jev model."""
    base_url: str | None = None
    """The stronger chat model's server, or the Jev API's."""
    below: float = pydantic.Field(default=0.9, ge=0, le=1)
    """Escalate a criterion whose verdict has less support than this (`escalate_below`)."""


class JudgeSection(_Section):
    """`[judge]`: what judges each answer."""

    kind: Literal["auto", "reference", "rating", "jev", "model", "none"] = "auto"
    """`auto` (the default): `reference` when the judge model is local, else `rating`;
    `reference`: a chat model answers each question itself, then checks the answer agrees
    (`reference_judge`); `rating`: a chat model rates 1-4; `jev`: TypeSafe's Jev API answers
    `criteria`; `model`: a chat model answers `criteria`; `none`: no refinement."""
    provider: ProviderName | None = None
    """The judging chat model's provider (`reference`, `rating`, `model`; default: the
    answering model's). Unset with `name` and `base_url`: a hosted answering model is reused as
    the judge; a local one is judged by `OFFLINE_JUDGE_MODEL` on a server of its own."""
    name: str | None = None
    """The judging chat model, or the Jev model."""
    base_url: str | None = None
    """The judging chat model's server, or the Jev API's."""
    success_rating: int = pydantic.Field(default=3, ge=1, le=4)
    """The least rating that passes (`rating`)."""
    criteria: tuple[CriterionSection, ...] = ()
    """The criteria (`jev`, `model`; at least one question)."""
    fail_fast: bool = False
    """When a check fails, skip the judging call (`jev`, `model`)."""
    min_confidence: float | None = pydantic.Field(default=None, ge=0, le=1)
    """A choice or score with less support than this is INCONCLUSIVE (`jev`, `model`)."""
    fail_on_inconclusive: bool = False
    """Count INCONCLUSIVE findings as failures (`jev`, `model`)."""
    fail_on_error: bool | None = None
    """Deprecated, no effect (a note on stderr when set): no judge produces an ERROR finding."""
    escalate: EscalateSection | None = None
    """`[judge.escalate]`: re-ask the unsure criteria of a stronger judge (`jev`, `model`)."""

    @pydantic.field_validator("criteria")
    @classmethod
    def _no_criteria_for_rating(
        cls, criteria: tuple[Any, ...], info: pydantic.ValidationInfo
    ) -> tuple[Any, ...]:
        kind = info.data.get("kind")
        if kind in ("auto", "reference", "rating") and criteria:
            raise ValueError(
                f'kind = "{kind}" asks one built-in question and takes no [[judge.criteria]]: '
                'set kind = "jev" (Jev answers them) or kind = "model" (a chat model does), '
                "or remove the criteria"
            )
        return criteria

    @pydantic.model_validator(mode="after")
    def _jev_and_model_need_criteria(self) -> JudgeSection:
        if self.kind in ("jev", "model") and not self.criteria:
            raise ValueError(
                f'kind = "{self.kind}" needs at least one [[judge.criteria]] entry (a noul, '
                'score or choice question); or use kind = "rating" for a 1-4 rating, or "reference"'
            )
        if self.escalate is not None and self.kind not in ("jev", "model"):
            raise ValueError(
                f'[judge.escalate] re-asks criteria, which kind = "{self.kind}" has none of: '
                'set kind = "jev" or "model" with [[judge.criteria]], or remove [judge.escalate]'
            )
        return self

    def build_criteria(self) -> list[Criterion]:
        """The `Judge`'s criteria, built and checked.

        Raises:
            ConfigError: a criterion the Judge refuses; `key` names the setting.
        """
        from ..judge.criteria import check_criteria

        built = [_build_criterion(i, c) for i, c in enumerate(self.criteria)]
        if self.kind not in ("jev", "model"):
            return built
        # Check growing prefixes, so an error names the first criterion that breaks a rule.
        for end in range(1, len(built) + 1):
            try:
                check_criteria(built[:end])
            except JudgeUsageError as exc:
                if "at least one question criterion" in str(exc):
                    continue  # only code checks so far: the full list decides
                where = f"judge.criteria[{end - 1}]"
                text = str(exc)
                field = "name" if "named" in text else None
                if "when_chosen" in text or "depends on the choice" in text:
                    field = "when_chosen"
                elif "depends on" in text:
                    field = "when_passed"
                raise _config_error(f"{where}.{field}" if field else where, text) from None
        with _key("judge.criteria"):
            check_criteria(built)
        return built


@contextlib.contextmanager
def _key(path: str) -> Iterator[None]:
    """Turn a `JudgeUsageError` raised inside into a `ConfigError` naming the setting `path`."""
    try:
        yield
    except (JudgeUsageError, re.error) as exc:
        raise _config_error(path, str(exc)) from None


def _config_error(path: str, problem: str) -> ConfigError:
    return ConfigError(f"invalid setting: {path}: {problem}", key=path)


def _build_criterion(index: int, section: Any) -> Criterion:
    from ..jev import Choice, Noul, Score
    from ..judge.criteria import choice, noul, score

    at = f"judge.criteria[{index}]"
    if isinstance(section, CheckCriterionSection):
        return _build_check(at, section)
    conditions: dict[str, Any] = {"when_passed": section.when_passed}
    if section.when_chosen is not None:
        conditions["when_chosen"] = (section.when_chosen.criterion, section.when_chosen.labels)
    if isinstance(section, NoulCriterionSection):
        with _key(f"{at}.question"):
            question = Noul(section.question, section.when_true, section.when_false)
        with _key(f"{at}.name"):
            return noul(section.name, question, section.minimum, **conditions)
    if isinstance(section, ScoreCriterionSection):
        with _key(f"{at}.levels"):
            rubric = Score(section.question, list(section.levels))
        with _key(f"{at}.minimum"):
            return score(section.name, rubric, section.minimum, **conditions)
    assert isinstance(section, ChoiceCriterionSection)
    labels: dict[str, Any] = (
        dict(section.options)
        if isinstance(section.options, dict)
        else dict.fromkeys(section.options)  # a list: labels that speak for themselves
    )
    with _key(f"{at}.options"):
        asked = Choice(section.question, labels)
    with _key(f"{at}.accept"):
        return choice(section.name, asked, section.accept, **conditions)


def _build_check(at: str, section: CheckCriterionSection) -> Criterion:
    from ..judge.criteria import check

    tests = (
        section.max_length,
        section.min_length,
        section.pattern,
        section.must_contain,
        section.must_not_contain,
    )
    if all(t is None or t == () for t in tests):
        raise _config_error(
            at,
            "a check needs at least one test: max_length, min_length, pattern, must_contain "
            "or must_not_contain (a check of your own function has no TOML form: build the "
            "Judge in Python with check(name, predicate, defect))",
        )
    if section.min_length and section.max_length and section.min_length > section.max_length:
        raise _config_error(
            f"{at}.min_length",
            f"min_length {section.min_length} is above max_length {section.max_length}",
        )
    compiled = None
    if section.pattern is not None:
        with _key(f"{at}.pattern"):
            compiled = re.compile(section.pattern, re.IGNORECASE if section.ignore_case else 0)
    predicate = AnswerCheck(
        max_length=section.max_length,
        min_length=section.min_length,
        pattern=compiled,
        must_contain=section.must_contain,
        must_not_contain=section.must_not_contain,
        ignore_case=section.ignore_case,
    )
    with _key(f"{at}.defect"):
        return check(section.name, predicate, section.defect or predicate.describe())


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    """The predicate of a `kind = "check"` criterion: tests on the answer's text."""

    max_length: int | None = None
    """The most characters allowed."""
    min_length: int | None = None
    """The fewest characters allowed."""
    pattern: re.Pattern[str] | None = None
    """A match of this must be found in the answer."""
    must_contain: Sequence[str] = ()
    """Every one of these must be in the answer."""
    must_not_contain: Sequence[str] = ()
    """None of these may be in the answer."""
    ignore_case: bool = False
    """Compare the texts case-insensitively (the pattern carries its own flag)."""

    def __call__(self, judged: JudgeInput) -> bool:
        """True when the answer passes every test."""
        answer = judged.assistant_answer
        if self.max_length is not None and len(answer) > self.max_length:
            return False
        if self.min_length is not None and len(answer) < self.min_length:
            return False
        if self.pattern is not None and self.pattern.search(answer) is None:
            return False
        text = answer.casefold() if self.ignore_case else answer

        def norm(part: str) -> str:
            return part.casefold() if self.ignore_case else part

        if any(norm(part) not in text for part in self.must_contain):
            return False
        return not any(norm(part) in text for part in self.must_not_contain)

    def describe(self) -> str:
        """The default defect: what the answer must be."""
        rules: list[str] = []
        if self.max_length is not None:
            rules.append(f"be at most {self.max_length} characters long")
        if self.min_length is not None:
            rules.append(f"be at least {self.min_length} characters long")
        if self.pattern is not None:
            rules.append(f"match the pattern {self.pattern.pattern!r}")
        if self.must_contain:
            rules.append("contain " + ", ".join(repr(p) for p in self.must_contain))
        if self.must_not_contain:
            rules.append("not contain " + ", ".join(repr(p) for p in self.must_not_contain))
        return "The answer must " + "; ".join(rules)


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

    concurrency: int | None = pydantic.Field(default=None, ge=1, le=10_000)
    """Refinements in flight at once; unset: 16, or `LOCAL_CONCURRENCY` on the local model
    (whose server then gets one slot per item in flight)."""
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

    @property
    def local(self) -> bool:
        """Whether the answering model is the local one (llama.cpp, started by the CLI)."""
        return resolve_provider(self.model.provider) == "local"

    def concurrency(self) -> int:
        """Items in flight: `[run] concurrency`, else 16 (remote) or `LOCAL_CONCURRENCY`."""
        given = self.run.concurrency
        if not self.local:
            return 16 if given is None else given
        return min(LOCAL_CONCURRENCY if given is None else given, LOCAL_MAX_SLOTS)

    def max_tokens(self) -> int | None:
        """`[model] max_tokens`, else `LOCAL_MAX_TOKENS` on the local model (else unset)."""
        if self.model.max_tokens is not None or not self.local:
            return self.model.max_tokens
        return LOCAL_MAX_TOKENS

    def describe(self) -> dict[str, Any]:
        """The resolved settings, plus which API keys are set (never their values)."""
        described = self.model_dump(mode="json")
        described["model"]["provider"] = resolve_provider(self.model.provider)
        described["model"]["max_tokens"] = self.max_tokens()
        described["judge"]["kind"] = judge_kind(self)  # `auto` said as what it will be
        described["run"]["concurrency"] = self.concurrency()
        described["api_keys"] = {
            name: "set" if os.environ.get(var) else "not set" for name, var in _KEYS.items()
        }
        redacted: dict[str, Any] = _urls_redacted(described)
        return redacted


def _urls_redacted(value: Any) -> Any:
    """`value` (dumped settings) with every `base_url`'s user-info blanked out, as the keys are."""
    if isinstance(value, dict):
        return {
            key: redact_url(item) if key == "base_url" and isinstance(item, str)
            else _urls_redacted(item)
            for key, item in value.items()
        }  # fmt: skip
    if isinstance(value, list):
        return [_urls_redacted(item) for item in value]
    return value


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
        except ValueError as exc:  # tomllib's int(): a number of more than 4,300 digits
            raise ConfigError(f"config file {path} holds an unusable value: {exc}") from None
        except RecursionError:
            raise ConfigError(f"config file {path} is nested too deeply to read") from None
    for section, values in overrides.items():
        given = {k: v for k, v in values.items() if v is not None}
        if given:
            current = data.get(section, {})
            if not isinstance(current, dict):
                raise ConfigError(f"[{section}] in the config file must be a table")
            data[section] = {**current, **given}
    try:
        config = CliConfig.model_validate(data)
    except pydantic.ValidationError as exc:
        where = f" in {path}" if path else ""
        problems = [(_key_path(error["loc"]), _problem(error)) for error in exc.errors()]
        text = "; ".join(f"{key}: {problem}" for key, problem in problems)
        raise ConfigError(f"invalid setting{where}: {text}", key=problems[0][0]) from None
    if config.judge.fail_on_error is not None:
        # Kept readable so that existing files still load; said, so that it is not relied on.
        print(
            "jevrefine: [judge] fail_on_error has no effect and will be removed (no judge "
            "produces an ERROR finding); delete it from the config file",
            file=sys.stderr,
        )
    if config.judge.kind in ("jev", "model"):
        try:
            config.judge.build_criteria()  # the Judge's own rules, checked before anything runs
        except ConfigError as exc:
            where = f" in {path}" if path else ""
            message = str(exc).replace("invalid setting:", f"invalid setting{where}:", 1)
            raise ConfigError(message, key=exc.key) from None
    return config


_SECTIONS: dict[tuple[str, ...], type[pydantic.BaseModel]] = {
    (): CliConfig,
    ("model",): ModelSection,
    ("judge",): JudgeSection,
    ("refine",): RefineSection,
    ("run",): RunSection,
    **{("judge", "criteria", kind): section for kind, section in CRITERION_KINDS.items()},
    **{
        ("judge", "criteria", kind, "when_chosen"): WhenChosenSection
        for kind in ("noul", "score", "choice")
    },
}


def _key_path(loc: Sequence[int | str]) -> str:
    """`('judge', 'criteria', 2, 'score', 'levels')` -> `judge.criteria[2].levels`."""
    text = ""
    previous: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(previous, int) and part in CRITERION_KINDS:
            pass  # the discriminator's tag, not a key the user wrote
        else:
            text += f".{part}" if text else part
        previous = part
    return text


def _problem(error: Mapping[str, Any]) -> str:
    """The error's message, with the keys the section does take when a key is unknown."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] not in ("extra_forbidden", "missing"):
        return message
    parent = tuple(part for part in error["loc"][:-1] if isinstance(part, str))
    section = _SECTIONS.get(parent)
    if section is None:
        return message
    keys = sorted(section.model_fields, key=lambda k: k != "kind")  # kind first, else as declared
    key = str(error["loc"][-1])
    if error["type"] == "missing":
        return f"required key missing: add {key} = ..."
    hint = ""
    owners = [k for k, s in CRITERION_KINDS.items() if key in s.model_fields]
    if parent[:2] == ("judge", "criteria") and owners and parent[-1] not in owners:
        hint = f'; {key} belongs to kind = "{owners[0]}" criteria: set that kind'
    else:
        close = difflib.get_close_matches(key, keys, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
    described = f"[{'.'.join(parent)}]" if parent else "the top level"
    if parent[:2] == ("judge", "criteria"):
        described = f'[[judge.criteria]] kind = "{parent[2]}"'
    return f"unknown key{hint} ({described} takes {', '.join(keys)})"


def missing_key(config: CliConfig) -> str | None:
    """What API key the settings need but the environment lacks, said in CLI terms; else None.

    A model with `base_url` needs no key (a local OpenAI-compatible server takes none); the
    Jev judge always needs `TYPESAFE_API_KEY`.
    """
    needs: list[tuple[str, str | None, str]] = [
        (resolve_provider(config.model.provider), config.model.base_url, "--base-url")
    ]
    judge = config.judge
    if judge.kind in _MODEL_KINDS and (judge.provider or judge.name or judge.base_url):
        judge_provider = judge.provider or config.model.provider
        needs.append((resolve_provider(judge_provider), judge.base_url, "--judge-base-url"))
    escalate = judge.escalate
    if escalate is not None and escalate.kind == "model":
        stronger = resolve_provider(escalate.provider or config.model.provider)
        needs.append((stronger, escalate.base_url, "[judge.escalate] base_url"))
    for provider, base_url, flag in needs:
        if provider == "local" or base_url is not None or os.environ.get(_KEYS[provider]):
            continue
        name = HOSTED[provider].label
        return (
            f"no {name} API key: set the {_KEYS[provider]} environment variable, pass {flag} "
            "of a compatible server that takes none, or use --provider local (no key needed)"
        )
    uses_jev = judge.kind == "jev" or (escalate is not None and escalate.kind == "jev")
    if uses_jev and not os.environ.get(_KEYS["jev"], "").strip():
        return (
            f"the Jev judge needs an API key: set the {_KEYS['jev']} environment variable, or "
            "use --judge rating (a chat model rates the answers) or --judge none"
        )
    return None


_MODEL_KINDS: Final = ("auto", "reference", "rating", "model")
"""The judge kinds a chat model answers."""


def judge_kind(config: CliConfig) -> str:
    """`[judge] kind` with `auto` resolved: `reference` for a local judge model, else `rating`."""
    spec = config.judge
    if spec.kind != "auto":
        return spec.kind
    provider = resolve_provider(spec.provider or config.model.provider)
    local = provider == "local" and spec.base_url is None
    if spec.provider is None and spec.name is None and spec.base_url is None:
        local = config.local and config.model.base_url is None
    return "reference" if local else "rating"


@dataclass(frozen=True, slots=True)
class Models:
    """What `open_models` yields: the answering model, the judge (if any), where they run."""

    model: ChatModel
    """The answering model."""
    judge: Judge | None
    """The judge; `None` when `[judge] kind = "none"`."""
    description: str
    """One line: provider and model name (no secrets)."""
    judge_model: ChatModel | None = None
    """The chat model answering the judge's questions (`None`: Jev, or no judge)."""
    judge_description: str = ""
    """One line: what judges and how (empty without a judge)."""
    self_judging: bool = False
    """Whether the answering model judges its own answers."""


@contextlib.asynccontextmanager
async def open_models(
    config: CliConfig, *, local_slots: int = 1, judge_only: bool = False
) -> AsyncIterator[Models]:
    """Open the answering model and the judge for `config`; closes whatever it opened.

    A local model's server gets `local_slots` slots (requests answered at once), each with
    `LOCAL_SLOT_CONTEXT` tokens of context. `judge_only` (`jevrefine judge`) leaves the answering
    model closed when a model of its own judges; `Models.model` is then the judge's model.
    """
    async with contextlib.AsyncExitStack() as stack:
        section = config.model
        kind = judge_kind(config)
        model: ChatModel | None = None
        if not (judge_only and kind in _MODEL_KINDS and _judge_model_of_its_own(config)):
            model = await _open_model(
                stack, section.provider, section.name, section.base_url, local_slots
            )
        spec = config.judge
        judge: Judge | None = None
        judge_model: ChatModel | None = None
        if kind in _MODEL_KINDS:
            judge_model = await _open_judge_model(stack, config, model, local_slots)
        if model is None:
            assert judge_model is not None
            model = judge_model
        if kind == "reference":
            from ..judge._judge import reference_judge

            assert judge_model is not None
            judge = reference_judge(judge_model, constraint=_constraint_for(judge_model))
        elif kind == "rating":
            from ..judge._judge import rating_judge

            assert judge_model is not None
            judge = rating_judge(judge_model, success_rating=spec.success_rating)
        elif kind in ("jev", "model"):
            from ..jev import JudgeClient
            from ..judge import ModelJudgeClient
            from ..judge._judge import Judge

            answers: SystemOneClient
            if kind == "jev":
                answers = await stack.enter_async_context(
                    JudgeClient(base_url=spec.base_url, model=spec.name)
                )
            else:
                assert judge_model is not None
                answers = ModelJudgeClient(judge_model)  # closes nothing: the stack closes models
            stronger = await _open_escalation(stack, config, local_slots)
            judge = Judge(
                answers,
                spec.build_criteria(),
                fail_fast=spec.fail_fast,
                min_confidence=spec.min_confidence,
                fail_on_inconclusive=spec.fail_on_inconclusive,
                escalate_to=stronger,
                escalate_below=0.9 if spec.escalate is None else spec.escalate.below,
            )
        itself = judge_model is not None and not _judge_model_of_its_own(config)
        described = _judge_description(kind, judge_model, spec, itself=itself)
        yield Models(
            model, judge, f"{model.provider} {model.model_name}", judge_model, described, itself
        )


def _judge_model_of_its_own(config: CliConfig) -> bool:
    """Whether a model judges that is not the answering model (opened apart from it).

    Unnamed, a hosted answering model judges itself (as before); a local one is judged by
    `OFFLINE_JUDGE_MODEL` on its own server, unless that is the model answering.
    """
    spec, section = config.judge, config.model
    named = spec.provider is not None or spec.name is not None or spec.base_url is not None
    provider = resolve_provider(spec.provider or section.provider)
    if provider == "local" and spec.base_url is None:
        answering_locally = config.local and section.base_url is None
        if answering_locally and offline_judge_model(spec.name) == offline_model(section.name):
            return False  # the same file: one server, and `Models.self_judging` says so
        return named or answering_locally
    return named


async def _open_judge_model(
    stack: contextlib.AsyncExitStack,
    config: CliConfig,
    model: ChatModel | None,
    local_slots: int,
) -> ChatModel:
    """The chat model that judges: the one named, the offline judge model, or `model` itself."""
    if not _judge_model_of_its_own(config):
        assert model is not None  # open_models opened it for this
        return model
    spec, section = config.judge, config.model
    provider = resolve_provider(spec.provider or section.provider)
    if provider == "local" and spec.base_url is None:
        slots = max(1, min(local_slots, LOCAL_MAX_SLOTS))
        judge_model, _ = await open_local_model(
            stack, offline_judge_model(spec.name), ctx=LOCAL_SLOT_CONTEXT * slots, parallel=slots
        )
        return judge_model
    return await _open_model(stack, provider, spec.name, spec.base_url, local_slots)


def _constraint_for(model: ChatModel) -> Literal["json_schema", "grammar"]:
    # A llama.cpp grammar makes the answer the first token: the cheapest on a small CPU.
    return "grammar" if model.server_address in ("127.0.0.1", "localhost") else "json_schema"


def _judge_description(
    kind: str, judge_model: ChatModel | None, spec: JudgeSection, *, itself: bool
) -> str:
    if kind == "none":
        return ""
    if kind == "jev":
        return "Jev (TypeSafe's judge API)"
    assert judge_model is not None
    how = {
        "reference": "answers each question itself, then checks the answer agrees",
        "rating": f"rates 1-4, passing at {spec.success_rating}",
        "model": "answers the [[judge.criteria]] questions",
    }[kind]
    who = f"{judge_model.model_name}"
    if itself:
        who += " (the answering model itself)"
    elif judge_model.server_address in ("127.0.0.1", "localhost"):
        who += " (a separate local server)"
    return f"{who}: {how}"


async def _open_escalation(
    stack: contextlib.AsyncExitStack, config: CliConfig, local_slots: int
) -> SystemOneClient | None:
    """The `[judge.escalate]` client, opened on `stack`; `None` without that section."""
    spec = config.judge.escalate
    if spec is None:
        return None
    if spec.kind == "jev":
        from ..jev import JudgeClient

        return await stack.enter_async_context(JudgeClient(base_url=spec.base_url, model=spec.name))
    from ..judge import ModelJudgeClient

    provider = spec.provider or config.model.provider
    model = await _open_model(stack, provider, spec.name, spec.base_url, local_slots)
    return ModelJudgeClient(model)


async def _open_model(
    stack: contextlib.AsyncExitStack,
    provider: str,
    name: str | None,
    base_url: str | None,
    local_slots: int,
) -> ChatModel:
    slots = max(1, min(local_slots, LOCAL_MAX_SLOTS))
    model, _ = await open_chat_model(
        stack,
        resolve_provider(provider),
        name,
        base_url=base_url,
        ctx=LOCAL_SLOT_CONTEXT * slots,
        parallel=slots,
    )
    return model
