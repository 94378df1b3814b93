"""`AsyncClosing`: `async with obj:` for an object that releases what it holds in `aclose()`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from types import TracebackType

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

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
