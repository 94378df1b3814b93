"""JudgeClient honours proxy settings: the lean transport is used only when no proxy is set."""

from __future__ import annotations

import pytest

from jevrefine.jev import JudgeClient


def path_of(client: JudgeClient) -> str:
    """Which path the client's wire took: the raw keep-alive core, or httpx2's client."""
    return client._wire.path


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
        assert path_of(client) == "raw"


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "http_proxy", "ALL_PROXY"])
async def test_a_configured_proxy_gets_httpx_transport(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "http://127.0.0.1:3128")
    async with JudgeClient("key", base_url="http://127.0.0.1:9") as client:
        assert path_of(client) == "httpx"
