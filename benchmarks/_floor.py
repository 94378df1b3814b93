"""The CPU floor: the least client a benchmark's HTTP calls can be made with.

`FloorClient` is asyncio streams, a stack of idle keep-alive connections per server, and HTTP/1.1
written and read by hand: one `write` per request, the status line and `content-length` parsed,
the bodies encoded and decoded by pydantic-core's JSON codec (the fastest installed; jevrefine's
clients use it too, so the floor must). No framework, no validation beyond what the fake servers
need, no retries, no timeouts. Whatever a real client adds (an SDK's request building and response
models, httpx's Request/Response objects, its pool, the adapters' checks), this one does not
pay, so its CPU time for a workload is the floor any client's can approach.

An earlier round called a hand-written `openai` + `httpx2` loop the floor; that loop pays the
SDK's layers and httpx's pool probing (one `poll()` per idle connection per request), so it was
no floor. It stays in the benchmarks as the "vendor-SDK loop": what a user writes without
jevrefine.

It only speaks to the fake servers of `jevrefine.testing` (plain HTTP, `content-length` bodies):
a benchmark helper, not a client.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import pydantic_core

__all__ = ["FloorClient"]


class FloorClient:
    """JSON POSTs over hand-written HTTP/1.1 keep-alive to one fake server (`base_url`)."""

    def __init__(self, base_url: str, *, headers: dict[str, str] | None = None) -> None:
        split = urlsplit(base_url)
        assert split.scheme == "http", base_url
        assert split.hostname, base_url
        self._host = split.hostname
        self._port = split.port or 80
        self._prefix = split.path.rstrip("/")
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._fixed = (
            f"Host: {self._host}:{self._port}\r\ncontent-type: application/json\r\n{extra}"
        ).encode("latin-1")
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST `body` as JSON to `base_url + path`; the decoded JSON answer (a 200's)."""
        data = pydantic_core.to_json(body)
        head = b"POST %s HTTP/1.1\r\n%scontent-length: %d\r\n\r\n" % (
            (self._prefix + path).encode("ascii"),
            self._fixed,
            len(data),
        )
        if self._idle:
            reader, writer = self._idle.pop()
        else:
            reader, writer = await asyncio.open_connection(self._host, self._port)
        writer.write(head + data)
        status_line = await reader.readline()
        status = int(status_line.split(b" ", 2)[1])
        length = 0
        while (line := await reader.readline()) != b"\r\n":
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        content = await reader.readexactly(length)
        self._idle.append((reader, writer))
        if status != 200:
            raise RuntimeError(f"the fake server answered {status}: {content[:200]!r}")
        return pydantic_core.from_json(content)

    async def aclose(self) -> None:
        """Close every idle connection."""
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()
