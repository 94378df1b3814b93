"""The settings every vendor-SDK adapter takes, checked once into one frozen value.

`OpenAIChatModel` and `AnthropicChatModel` accept the same construction arguments (model, base
URL, API key, default options, retries, the three deadlines, the response cap). Each argument is
checked here, through the shared validators, so both adapters refuse a bad one with the same
message (naming the parameter, the value and what to pass instead), and the adapters keep only
what differs: the SDK, its defaults, and which arguments conflict with `client=`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import _validate
from .._http._bounded import check_max_response_bytes
from ..exceptions import UserError
from ..messages import ChatOptions
from ._deadlines import Deadlines, check_max_retries

__all__ = ["AdapterSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterSettings:
    """An adapter's checked construction arguments (the key is kept out of the repr)."""

    model: str
    """The model asked when a prompt names none."""
    base_url: str | None
    """The server's base URL as given (`None`: the SDK's environment variable or default)."""
    api_key: str | None = field(repr=False)
    """The key as given (`None`: the SDK's environment variable)."""
    options: ChatOptions
    """Default options for every call (empty when none were given)."""
    max_retries: int
    """Transport retries (the wire's policy; the SDK client itself retries nothing)."""
    deadlines: Deadlines
    """The per-read, per-call and per-stream time limits."""
    max_response_bytes: int | None
    """The cap on a response body; `None` for none."""

    @classmethod
    def of(
        cls,
        *,
        model: object,
        model_example: str,
        base_url: object,
        base_url_example: str,
        api_key: object,
        options: object,
        max_retries: object,
        timeout: object,
        total_timeout: object,
        stream_timeout: object,
        max_response_bytes: object,
    ) -> AdapterSettings:
        """Check every argument; the first bad one raises `UserError`."""
        checked_model = _validate.text("model", model, nonblank=True, example=model_example)
        checked_url = _validate.text("base_url", base_url, optional=True, example=base_url_example)
        key = _validate.secret("api_key", api_key)
        cap = check_max_response_bytes(max_response_bytes)
        retries = check_max_retries(max_retries)
        if options is not None and not isinstance(options, ChatOptions):
            raise UserError(
                f"options={type(options).__name__} is not a ChatOptions: pass "
                "options=ChatOptions(...), or None"
            )
        deadlines = Deadlines.of(
            timeout=timeout,
            total_timeout=total_timeout,
            stream_timeout=stream_timeout,
            max_retries=retries,
        )
        return cls(
            model=checked_model,
            base_url=checked_url,
            api_key=key,
            options=options or ChatOptions(),
            max_retries=retries,
            deadlines=deadlines,
            max_response_bytes=cap,
        )
