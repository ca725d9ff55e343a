"""How Burrow's listeners run uvicorn: `Listener` leaves the signals to `burrow serve` and
serves on the socket `burrow serve` bound before its start (burrow/api/bind.py);
`HeadGuard` limits connections still sending a request head (the request line and
headers), on which no one is authenticated yet, so nothing else limits them.

Each connection sends a head within `head_seconds` of connecting (or of its next request's
first byte), or it gets a 408 and is closed; uvicorn times out idle keep-alive connections
but not a head that arrives a byte at a time. A head still not in after a second is slow:
one address holds at most `per_address` slow heads, all addresses together at most
`total` (derived from the open-file limit), and a connection that turns slow over either
is closed then. Trusted proxies (BURROW_TRUSTED_PROXIES) are exempt from the per-address
cap: every client arrives from them.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from burrow import descriptors

# A head not in by then is slow; before that, no cap applies to it.
SLOW_AFTER_SECONDS = 1.0
REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 43\r\n\r\nThe request's headers took too long: retry."
)


class Listener(uvicorn.Server):
    """uvicorn's server without its own signal handling: `burrow serve` handles the signals
    for both listeners (uvicorn's, once per server, re-raise the signal after the shutdown,
    and the process then dies of it instead of exiting 0)."""

    def __init__(self, config: uvicorn.Config, bound: socket.socket | None = None) -> None:
        super().__init__(config)
        self.bound = bound  # bound before start-up (burrow/api/bind.py); else uvicorn binds

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is None and self.bound is not None:
            sockets = [self.bound]
        await super().serve(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def stop_accepting(self) -> None:
        for listening in getattr(self, "servers", ()):  # none before start-up finished
            listening.close()


class HeadGuard:
    """Connections whose head is slow (not in after `SLOW_AFTER_SECONDS`), per address;
    shared by the listeners. Only slow ones count: a burst of clients connecting at once
    (a page's requests, a thousand SSE clients) is accepted before any of their heads is
    read, and is never capped for it."""

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
        self.slow: Counter[str] = Counter()
        self.slow_total = 0  # the sum of `slow`, kept rather than summed per connection

    @classmethod
    def for_limit(
        cls,
        head_seconds: float,
        per_address: int,
        open_files: int,
        exempt: Callable[[str], bool] = lambda _: False,
    ) -> HeadGuard:
        """Slow heads get a quarter of what the reserve leaves (streams get half)."""
        total = max(1, (open_files - descriptors.RESERVED) // 4)
        return cls(head_seconds, per_address, total, exempt)

    def admits(self, address: str) -> bool:
        """Whether one more slow head from `address` may stay."""
        if self.total and self.slow_total >= self.total:
            return False
        if not self.per_address or self._exempt(address):
            return True
        return self.slow[address] < self.per_address

    def protocol(self) -> type[HttpToolsProtocol]:
        """uvicorn's HTTP protocol (`Config(http=...)`) with this guard on its heads."""
        guard = self

        class GuardedHttp(HttpToolsProtocol):
            _timer: asyncio.TimerHandle | None = None
            _slow = False
            _address = ""

            def connection_made(self, transport: Any) -> None:
                super().connection_made(transport)
                self._address = self.client[0] if self.client else ""
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
                    first = min(SLOW_AFTER_SECONDS, guard.head_seconds)
                    self._timer = self.loop.call_later(first, self._turned_slow)

            def _turned_slow(self) -> None:
                self._timer = None
                if not guard.admits(self._address):
                    self.transport.close()  # over a cap: it gets no more of our descriptors
                    return
                self._slow = True
                guard.slow[self._address] += 1
                guard.slow_total += 1
                rest = max(guard.head_seconds - SLOW_AFTER_SECONDS, 0)
                self._timer = self.loop.call_later(rest, self._too_slow)

            def _disarm(self) -> None:
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                if self._slow:
                    self._slow = False
                    guard.slow_total -= 1
                    guard.slow[self._address] -= 1
                    if guard.slow[self._address] <= 0:
                        del guard.slow[self._address]

            def _too_slow(self) -> None:
                self._timer = None
                self._disarm()
                if self.cycle is None or self.cycle.response_complete:
                    self.transport.write(REQUEST_TIMEOUT)
                self.transport.close()

        return GuardedHttp
