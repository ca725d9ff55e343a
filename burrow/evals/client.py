"""The eval's view of a Burrow server: its public HTTP API and a terminal, nothing inside.

Everything an eval does goes through the routes a browser or `curl` uses (DESIGN.md §3),
so a run measures the server as people meet it: journal, sandbox, approvals and all.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import websockets

CHECK_PATH = ".burrow/eval/check.sh"
SOLUTION_PATH = ".burrow/eval/solve.sh"
SHELL_ENDED = 4000  # the terminal socket's close code when its shell exits (DESIGN.md §3)


class EvalError(RuntimeError):
    """The server refused or failed a step; the message says which and why."""


class BurrowClient:
    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(60.0),
        )

    @classmethod
    async def login(cls, base_url: str, username: str, password: str) -> BurrowClient:
        """Sign in once and work with an API token named for the eval."""
        async with httpx.AsyncClient(base_url=base_url, timeout=30.0) as http:
            answer = await http.post(
                "/api/auth/login", json={"username": username, "password": password}
            )
            _check(answer, "sign in")
            answer = await http.post("/api/auth/tokens", json={"name": "burrow eval"})
            _check(answer, "create an API token")
        return cls(base_url, str(answer.json()["token"]))

    async def close(self) -> None:
        await self.http.aclose()

    async def create_conversation(
        self, title: str, approval_mode: str, environment: str | None = None
    ) -> str:
        body = {"title": title, "approval_mode": approval_mode, "environment": environment}
        answer = await self.http.post("/api/conversations", json=body)
        return str(_check(answer, "create a conversation")["id"])

    async def ensure_environment(self, definition: dict[str, Any], timeout: float) -> None:
        """Define the environment unless it is (its name is its build's key, so one of the
        same name is the same build), then wait until it is built; a failed build raises
        with its detail (the exit and the output's tail)."""
        name = definition["name"]
        answer = await self.http.post("/api/environments", json=definition)
        if answer.status_code != 409:
            _check(answer, f"define the environment {name}")
        deadline = time.monotonic() + timeout
        while True:
            answer = await self.http.get(f"/api/environments/{name}")
            built = _check(answer, f"read the environment {name}")
            if built["status"] == "ready":
                return
            if built["status"] != "building":
                raise EvalError(f"The environment {name} {built['status']}: {built['detail']}")
            if time.monotonic() > deadline:
                await self.http.post(f"/api/environments/{name}/cancel")
                raise EvalError(f"The environment {name} was not built in {timeout:.0f} s")
            await asyncio.sleep(0.5)

    async def set_budget(self, cid: str, budget: dict[str, float]) -> None:
        answer = await self.http.patch(f"/api/conversations/{cid}", json={"budget": budget})
        _check(answer, "set the budget")

    async def upload(self, cid: str, path: str, data: bytes) -> None:
        answer = await self.http.post(
            f"/api/conversations/{cid}/uploads",
            files={"file": (path.rsplit("/", 1)[-1], data)},
            data={"path": path},
        )
        _check(answer, f"upload {path}")

    async def send(self, cid: str, content: str) -> str:
        answer = await self.http.post(
            f"/api/conversations/{cid}/messages", json={"content": content}
        )
        return str(_check(answer, "send the prompt")["run_id"])

    async def wait_run(self, cid: str, run_id: str, timeout: float) -> list[dict[str, Any]]:
        """Every event of the run, once its run.finished is journaled; interrupts it (and
        waits for the close) if it outlives `timeout`."""
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        after, interrupted = 0, False
        while True:
            answer = await self.http.get(
                f"/api/conversations/{cid}/events", params={"after": after, "format": "json"}
            )
            page: list[dict[str, Any]] = _check(answer, "read the events")
            for event in page:
                after = event["seq"]
                if event["run_id"] == run_id:
                    seen.append(event)
                    if event["type"] == "run.finished":
                        return seen
            if not page:
                if not interrupted and time.monotonic() > deadline:
                    await self.http.post(f"/api/conversations/{cid}/interrupt", json={})
                    interrupted = True
                await asyncio.sleep(0.2)

    async def run_check(self, cid: str, script: bytes, timeout: float = 120.0) -> tuple[int, str]:
        return await self.run_script(cid, CHECK_PATH, script, timeout)

    async def run_script(
        self, cid: str, path: str, script: bytes, timeout: float = 120.0
    ) -> tuple[int, str]:
        """Run `script` (uploaded to the workspace's `path`) in the sandbox through a
        terminal, as a user would: (exit code, the output's last 4 KB)."""
        await self.upload(cid, path, script)
        answer = await self.http.post(
            f"/api/conversations/{cid}/terminals", json={"cols": 160, "rows": 48}
        )
        tid = _check(answer, "open a terminal")["terminal_id"]
        parts = urlsplit(self.base_url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        url = f"{scheme}://{parts.netloc}/api/conversations/{cid}/terminals/{tid}/ws"
        output = bytearray()
        headers = {"Authorization": f"Bearer {self.token}"}
        async with asyncio.timeout(timeout):
            async with websockets.connect(url, additional_headers=headers) as socket:
                await socket.send(f"exec bash /workspace/{path}\n".encode())
                try:
                    async for frame in socket:
                        if isinstance(frame, bytes):
                            output += frame
                            del output[:-4096]
                except websockets.ConnectionClosed:
                    pass
                if socket.close_code != SHELL_ENDED:
                    raise EvalError(f"The check's terminal closed with {socket.close_code}")
        for _ in range(50):  # the shell's exit is recorded as its socket closes
            answer = await self.http.get(f"/api/conversations/{cid}/terminals")
            listed = _check(answer, "list the terminals")
            terminal = next((t for t in listed if t["terminal_id"] == tid), None)
            if terminal is not None and terminal["exited"]:
                code = terminal["exit_code"]
                return (code if isinstance(code, int) else -1), output.decode(errors="replace")
            await asyncio.sleep(0.1)
        raise EvalError("The check's shell ended but its exit code never showed")


def _check(answer: httpx.Response, what: str) -> Any:
    if answer.is_success:
        return answer.json() if answer.content else None
    try:
        error = answer.json()["error"]
        detail = f"{error['code']}: {error['message']}"
    except (json.JSONDecodeError, KeyError, TypeError):
        detail = answer.text[:200]
    raise EvalError(f"Could not {what} (HTTP {answer.status_code}): {detail}")
