"""A Starlette app served by uvicorn on a free port of 127.0.0.1, in a thread of its own,
so blocking tests and tests with their own event loop can both talk to it."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import uvicorn
from starlette.routing import BaseRoute


class DropConnection(Exception):
    """Raised inside a streaming body so uvicorn aborts the connection mid-response."""


def _not_a_planned_drop(record: logging.LogRecord) -> bool:
    return not (record.exc_info and isinstance(record.exc_info[1], DropConnection))


# uvicorn logs the planned drop as an application error; keep test output clean.
logging.getLogger("uvicorn.error").addFilter(_not_a_planned_drop)


class ThreadedServer:
    thread_name = "fake-server"

    def __init__(self) -> None:
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def routes(self) -> list[BaseRoute]:
        raise NotImplementedError

    def start(self) -> Self:
        from starlette.applications import Starlette

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            Starlette(routes=self.routes()),
            lifespan="off",
            ws="none",  # never import websockets: its deprecation warnings are errors here
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=self.thread_name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                self.stop()
                raise RuntimeError(f"the {self.thread_name} server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


R = TypeVar("R")


class FakeModelServer(ThreadedServer, Generic[R]):
    """A fake model endpoint: the replies its requests take, in order, and the requests it
    saw. The queue is shared by the server's thread and the test's."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []  # every request body, in order
        self.headers: list[dict[str, str]] = []
        self._replies: deque[R] = deque()
        self._lock = threading.Lock()

    def enqueue(self, *replies: R) -> None:
        with self._lock:
            self._replies.extend(replies)

    def clear(self) -> None:
        """Drop the replies not yet taken (their caller is gone)."""
        with self._lock:
            self._replies.clear()

    @property
    def pending(self) -> int:
        """Replies not yet taken by a request."""
        with self._lock:
            return len(self._replies)
