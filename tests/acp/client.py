"""A scripted ACP client speaking the published schema to `burrow acp` in a child process."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any


class AcpClient:
    """Sends requests, collects session/update notifications, answers permission requests
    with `permission` (an optionId, or None for a cancelled outcome)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.updates: list[dict[str, Any]] = []
        self.permission_requests: list[dict[str, Any]] = []
        self.unsolicited: list[dict[str, Any]] = []  # answers with id null
        self.permission: str | None = "allow_once"
        self._next = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, server: str, token: str | None) -> AcpClient:
        env = {**os.environ, **({"BURROW_TOKEN": token} if token else {})}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "burrow.cli",
            "acp",
            "--server",
            server,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            limit=64 * 1024 * 1024,
        )
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            message = json.loads(line)
            assert message["jsonrpc"] == "2.0"
            if message.get("method") == "session/update":
                self.updates.append(message["params"])
            elif message.get("method") == "session/request_permission":
                self.permission_requests.append(message["params"])
                outcome = (
                    {"outcome": "selected", "optionId": self.permission}
                    if self.permission
                    else {"outcome": "cancelled"}
                )
                self.write({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})
            elif message.get("id") in self._waiting:
                self._waiting.pop(message["id"]).set_result(message)
            else:
                self.unsolicited.append(message)

    def write(self, message: dict[str, Any] | bytes) -> None:
        assert self.process.stdin is not None
        raw = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.process.stdin.write(raw)

    def send(self, method: str, params: Any) -> asyncio.Future[dict[str, Any]]:
        self._next += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = future
        self.write({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        return future

    async def call(self, method: str, params: Any, timeout: float = 60) -> dict[str, Any]:
        return await asyncio.wait_for(self.send(method, params), timeout)

    def notify(self, method: str, params: Any) -> None:
        self.write({"jsonrpc": "2.0", "method": method, "params": params})

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        self._reader.cancel()

    def kinds(self, session_id: str) -> list[str]:
        return [u["update"]["sessionUpdate"] for u in self.updates if u["sessionId"] == session_id]
