"""JudgeClient honours proxy settings: the lean transport is used only when no proxy is set."""

from __future__ import annotations

import pytest

from jevrefine._http import KeepAliveTransport
from jevrefine.jev import JudgeClient


def transport_of(client: JudgeClient) -> object:
    """The raw core the client calls directly, else its httpx client's transport."""
    if client._core is not None:
        return client._core
    return client._http._transport  # type: ignore[union-attr]


async def test_no_proxy_uses_the_keep_alive_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    async with JudgeClient("key", base_url="http://127.0.0.1:9") as client:
        assert isinstance(transport_of(client), KeepAliveTransport)


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "http_proxy", "ALL_PROXY"])
async def test_a_configured_proxy_gets_httpx_transport(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "http://127.0.0.1:3128")
    async with JudgeClient("key", base_url="http://127.0.0.1:9") as client:
        assert not isinstance(transport_of(client), KeepAliveTransport)
