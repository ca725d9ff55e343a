"""A real Burrow server with its preview listener, a conversation, and helpers to start
services in its sandbox and reach them through the proxy as a browser would."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import httpx

from burrow.sandbox.backend import Sandbox
from burrow.tools.base import ToolContext
from burrow.tools.preview import PreviewTool
from tests.api.harness import RunningServer

SERVERS = Path(__file__).parent / "servers"


@dataclass
class Preview:
    server: RunningServer
    cid: str
    proxy: httpx.AsyncClient  # to 127.0.0.1:<preview port>; the Host header picks the preview

    @property
    def port(self) -> int:
        assert self.server.preview_port is not None
        return self.server.preview_port

    def host(self, port: int, cid: str | None = None) -> str:
        return f"{port}-{cid or self.cid}.preview.localhost:{self.port}"

    async def sandbox(self) -> Sandbox:
        return await self.server.services.runtime.sandboxes.get(self.cid)

    async def start(self, port: int, script: str | None = None, command: str = "") -> None:
        """Start a service with the preview tool: one of servers/*.py, or `command`."""
        sandbox = await self.sandbox()
        if script is not None:
            await sandbox.write_file(script, (SERVERS / script).read_bytes())
            command = f"python3 {shlex.quote(script)} {port}"

        async def get_sandbox() -> Sandbox:
            return sandbox

        ctx = ToolContext(sandbox=get_sandbox, call_id="call_test", conversation_id=self.cid)
        result = await PreviewTool().run({"command": command, "port": port}, ctx)
        assert not result.is_error, result.output

    async def signed_url(self, port: int) -> str:
        response = await self.server.client.get(f"/api/conversations/{self.cid}/previews")
        assert response.status_code == 200, response.text
        [url] = [p["url"] for p in response.json() if p["port"] == port]
        return str(url)

    async def sign_in(self, port: int) -> str:
        """Follow the signed link as the iframe does; returns the cookie it set."""
        url = httpx.URL(await self.signed_url(port))
        response = await self.proxy.get(url.raw_path.decode(), headers={"host": self.host(port)})
        assert response.status_code == 303, response.text
        name, _, rest = response.headers["set-cookie"].partition("=")
        assert name == "burrow_preview"
        return rest.split(";")[0]

    async def get(
        self, port: int, path: str, cookie: str | None, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        sent = {"host": self.host(port), **(headers or {})}
        if cookie is not None:
            sent["cookie"] = f"burrow_preview={cookie}"
        return await self.proxy.get(path, headers=sent)
