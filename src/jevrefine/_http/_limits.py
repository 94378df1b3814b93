"""The one cap on how much of a response body jevrefine reads, model side and Jev side alike.

A peer decides how long its answer is; reading it whole before looking at it would let one broken
or hostile server take the process's memory. Both readers stop at the cap: the vendor SDKs'
capped HTTP client (`_http/_bounded.py`) and the lean keep-alive transport
(`_http/_pool.py`, the Jev client's and the adapters' whole-response calls). Past it they raise
`jevrefine.exceptions.ResponseTooLargeError` (the Jev client passes it on as
`JudgeResponseTooLargeError`, which is both that and a `JudgeResponseError`).
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES"]

DEFAULT_MAX_RESPONSE_BYTES: Final = 32 * 1024 * 1024
"""32 MiB: far above any chat answer (a 128k-token answer is well under 1 MiB of JSON) and a
System One answer (kilobytes), low enough that a flood costs one bounded buffer per request."""
