"""ChatClientRequest.scope: advisors' private state, shared by every copy of one request."""

from __future__ import annotations

from jevrefine import ChatClientRequest, Prompt, UserMessage


def test_every_copy_shares_the_scope_but_not_the_context() -> None:
    request = ChatClientRequest(Prompt((UserMessage("hi"),)), context={"a": 1})
    first = request.copy(prompt=Prompt((UserMessage("first"),)))
    first.scope["seen"] = True
    first.context["b"] = 2
    second = request.copy(prompt=Prompt((UserMessage("second"),)))
    assert second.scope == {"seen": True}
    assert second.context == {"a": 1}
    assert "scope" not in repr(request)
    assert request == ChatClientRequest(request.prompt, context={"a": 1})  # not compared


def test_a_new_request_starts_an_empty_scope() -> None:
    one = ChatClientRequest(Prompt((UserMessage("hi"),)))
    one.scope["x"] = 1
    assert ChatClientRequest(Prompt((UserMessage("hi"),))).scope == {}
