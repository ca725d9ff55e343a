"""JSON-RPC 2.0 over newline-delimited stdio, as ACP frames it: both sides send requests.

Invariant: every line read is answered or dispatched, whatever it holds; a line longer
than `max_line` is dropped (its bytes are never held) and answered with an error, and the
lines after it are read as usual. Requests run concurrently (a prompt lasts minutes while
a cancel must get through), at most `max_inflight` at once; more are refused at once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
AUTH_REQUIRED = -32000  # ACP's own code
RESOURCE_NOT_FOUND = -32002  # ACP's own code
SERVER_BUSY = -32001

MAX_LINE_BYTES = 8 * 1024 * 1024  # an editor's prompt may embed files; more is an attack
MAX_INFLIGHT = 64


class RpcError(Exception):
    """Answered to the caller as a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def as_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


Handler = Callable[[str, Any], Awaitable[Any]]


class Peer:
    """One side of the connection: reads `reader`, writes `writer` (a binary stream)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: BinaryIO,
        on_request: Handler,
        on_notification: Handler,
        *,
        max_line: int = MAX_LINE_BYTES,
        max_inflight: int = MAX_INFLIGHT,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.on_request = on_request
        self.on_notification = on_notification
        self.max_line = max_line
        self.max_inflight = max_inflight
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._buffer = bytearray()

    def send(self, message: dict[str, Any]) -> None:
        # One write of one line: json.dumps escapes newlines, so a message is one line.
        line = json.dumps({"jsonrpc": "2.0", **message}, ensure_ascii=False) + "\n"
        self.writer.write(line.encode())
        self.writer.flush()

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    async def request(self, method: str, params: Any) -> Any:
        """Ask the client; its error answer raises RpcError."""
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            self.send({"id": request_id, "method": method, "params": params})
            return await future
        finally:
            self._waiting.pop(request_id, None)

    async def serve(self) -> None:
        """Until stdin closes; then what is still running is cancelled."""
        try:
            while True:
                line = await self._read_line()
                if line is None:
                    return
                if line.strip():
                    self._dispatch(line)
        finally:
            for task in list(self._tasks):
                task.cancel()
            for future in self._waiting.values():
                future.cancel()

    async def _read_line(self) -> bytes | None:
        """The next line, or None at the end; a line past the bound is dropped as it
        arrives (never held whole) and answered with an error."""
        skipping = False
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                if not skipping:
                    return line
                self._too_long()
                return b""
            if len(self._buffer) > self.max_line:
                skipping = True
                self._buffer.clear()
            chunk = await self.reader.read(64 * 1024)
            if not chunk:
                if skipping:
                    self._too_long()
                rest, self._buffer = bytes(self._buffer), bytearray()
                return None if skipping or not rest else rest
            self._buffer += chunk

    def _too_long(self) -> None:
        message = f"A message longer than {self.max_line} bytes was dropped."
        self._error(None, RpcError(INVALID_REQUEST, message))

    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.send({"id": None, "error": RpcError(PARSE_ERROR, f"Parse error: {exc}").as_json()})
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            request_id = message.get("id") if isinstance(message, dict) else None
            self._error(
                request_id,
                RpcError(INVALID_REQUEST, 'Not a JSON-RPC 2.0 message ("jsonrpc": "2.0").'),
            )
            return
        method = message.get("method")
        request_id = message.get("id")
        if method is None:
            self._answered(message)
            return
        if not isinstance(method, str):
            self._error(request_id, RpcError(INVALID_REQUEST, "The method must be a string."))
            return
        if len(self._tasks) >= self.max_inflight:
            if request_id is not None:
                self._error(
                    request_id,
                    RpcError(
                        SERVER_BUSY, f"{self.max_inflight} requests are already running; retry."
                    ),
                )
            return
        task = asyncio.ensure_future(self._handle(request_id, method, message.get("params")))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _answered(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        future = self._waiting.get(request_id) if isinstance(request_id, int) else None
        if future is None or future.done():
            return  # an answer to nothing we asked: nothing to do with it
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            future.set_exception(
                RpcError(
                    code if isinstance(code := error.get("code"), int) else INTERNAL_ERROR,
                    str(error.get("message", "")),
                )
            )
        else:
            future.set_result(message.get("result"))

    async def _handle(self, request_id: Any, method: str, params: Any) -> None:
        if request_id is None:
            try:
                await self.on_notification(method, params)
            except Exception:  # a notification has no one to answer
                pass
            return
        try:
            result = await self.on_request(method, params)
        except RpcError as exc:
            self._error(request_id, exc)
        except Exception as exc:
            self._error(request_id, RpcError(INTERNAL_ERROR, f"Internal error: {exc}"))
        else:
            self.send({"id": request_id, "result": result})

    def _error(self, request_id: Any, error: RpcError) -> None:
        self.send({"id": request_id, "error": error.as_json()})
