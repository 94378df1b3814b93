"""`AsyncClosing`: `async with obj:` for an object that releases what it holds in `aclose()`."""

from __future__ import annotations

from typing import Self

__all__ = ["AsyncClosing"]


class AsyncClosing:
    """A mixin: `async with obj:` returns `obj` and awaits `obj.aclose()` on the way out.

    Subclasses implement `aclose`.
    """

    __slots__ = ()

    async def aclose(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    # The exception, if any, is not looked at (it propagates): `*exc_info`, as typeshed's
    # `contextlib.aclosing` has it.
    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
