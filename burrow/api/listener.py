"""How Burrow's listeners run uvicorn: `Listener` leaves the signals to `burrow serve`;
`HeadGuard` limits connections still sending a request head (the request line and
headers), on which no one is authenticated yet, so nothing else limits them.

Each connection sends a head within `head_seconds` of connecting (or of its next request's
first byte), or it gets a 408 and is closed; uvicorn times out idle keep-alive connections
but not a head that arrives a byte at a time. One address holds at most `per_address`
connections that are still sending one, all addresses together at most `total` (derived
from the open-file limit); a connection over either is closed at once. Trusted proxies
(BURROW_TRUSTED_PROXIES) are exempt from the per-address cap: every client arrives from them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from burrow import descriptors

REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 43\r\n\r\nThe request's headers took too long: retry."
)


class Listener(uvicorn.Server):
    """uvicorn's server without its own signal handling: `burrow serve` handles the signals
    for both listeners (uvicorn's, once per server, re-raise the signal after the shutdown,
    and the process then dies of it instead of exiting 0)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def stop_accepting(self) -> None:
        for listening in getattr(self, "servers", ()):  # none before start-up finished
            listening.close()


class HeadGuard:
    """The count of connections sending a head, per address; shared by the listeners."""

    def __init__(
        self,
        head_seconds: float,
        per_address: int,
        total: int,
        exempt: Callable[[str], bool] = lambda _: False,
    ) -> None:
        self.head_seconds = head_seconds
        self.per_address = per_address  # 0: no cap
        self.total = total  # 0: no cap
        self._exempt = exempt
        self.pending: Counter[str] = Counter()
        self.in_flight = 0  # the sum of `pending`, kept rather than summed per connection

    @classmethod
    def for_limit(
        cls,
        head_seconds: float,
        per_address: int,
        open_files: int,
        exempt: Callable[[str], bool] = lambda _: False,
    ) -> HeadGuard:
        """Heads in flight get a quarter of what the reserve leaves (streams get half)."""
        total = max(1, (open_files - descriptors.RESERVED) // 4)
        return cls(head_seconds, per_address, total, exempt)

    def admits(self, address: str) -> bool:
        if self.total and self.in_flight >= self.total:
            return False
        return not (
            self.per_address
            and self.pending[address] >= self.per_address
            and not self._exempt(address)
        )

    def protocol(self) -> type[HttpToolsProtocol]:
        """uvicorn's HTTP protocol (`Config(http=...)`) with this guard on its heads."""
        guard = self

        class GuardedHttp(HttpToolsProtocol):
            _timer: asyncio.TimerHandle | None = None
            _address: str = ""

            def connection_made(self, transport: Any) -> None:
                super().connection_made(transport)
                self._address = self.client[0] if self.client else ""
                if not guard.admits(self._address):
                    transport.close()
                    return
                self._arm()

            def on_message_begin(self) -> None:
                super().on_message_begin()
                self._arm()  # the next request's head on a kept-alive connection

            def on_headers_complete(self) -> None:
                self._disarm()
                super().on_headers_complete()

            def connection_lost(self, exc: Exception | None) -> None:
                self._disarm()
                super().connection_lost(exc)

            def _arm(self) -> None:
                if self._timer is None:
                    guard.pending[self._address] += 1
                    guard.in_flight += 1
                    self._timer = self.loop.call_later(guard.head_seconds, self._too_slow)

            def _disarm(self) -> None:
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                    guard.pending[self._address] -= 1
                    guard.in_flight -= 1
                    if guard.pending[self._address] <= 0:
                        del guard.pending[self._address]

            def _too_slow(self) -> None:
                self._disarm()
                if self.cycle is None or self.cycle.response_complete:
                    self.transport.write(REQUEST_TIMEOUT)
                self.transport.close()

        return GuardedHttp
