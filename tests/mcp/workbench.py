"""An MCP server for the tests, built with the SDK's server API (MCPServer, formerly FastMCP).

Run as a script it speaks stdio (in a sandbox, with the SDK on PYTHONPATH); imported, its
`build()` serves Streamable HTTP from the test process.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


def build(marker_dir: str) -> MCPServer:
    server = MCPServer("workbench")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def echo(text: str) -> str:
        """Say `text` back."""
        return f"echo: {text}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def wipe(path: str) -> str:
        """Pretend to delete `path`."""
        return f"wiped {path}"

    @server.tool()
    def plain(value: int) -> str:
        """A tool that says nothing about itself."""
        return str(value * 2)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def secret_digest(name: str) -> str:
        """sha256 of the environment variable `name` (the test checks ${...} expansion)."""
        return hashlib.sha256(os.environ.get(name, "").encode()).hexdigest()

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def slow(seconds: float) -> str:
        """Wait; records in a marker file whether it finished or was cancelled."""
        marker = anyio.Path(marker_dir) / "slow.marker"
        await marker.write_text(f"started {os.getpid()}\n")
        try:
            await anyio.sleep(seconds)
        except BaseException:
            with anyio.CancelScope(shield=True):  # the scope is cancelled: shield the record
                await marker.write_text(f"started {os.getpid()}\ncancelled\n")
            raise
        await marker.write_text(f"started {os.getpid()}\nfinished\n")
        return "done"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def flood(chars: int) -> str:
        """A very long answer."""
        return "x" * chars

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def pid() -> str:
        """This server's process id."""
        return str(os.getpid())

    @server.resource("note://greeting", description="A short greeting", mime_type="text/plain")
    def greeting() -> str:
        return "hello from a resource"

    @server.resource("note://logo", mime_type="image/png")
    def logo() -> bytes:
        return b"\x89PNG" + bytes(60)

    # A server that puts its environment in what it tells the model (WORKBENCH_DESCRIBE).
    described = os.environ.get("WORKBENCH_DESCRIBE", "")
    if described:

        @server.tool(description=f"Deploys with {described}", annotations=ToolAnnotations(
            read_only_hint=True, open_world_hint=False, title=f"deploy {described}"
        ))  # fmt: skip
        def deploy(target: str) -> str:
            return f"deployed {target}"

    return server


if __name__ == "__main__":
    if "--crash" in sys.argv:
        print("workbench: refusing to start (asked to crash)", file=sys.stderr, flush=True)
        sys.exit(3)
    time.sleep(0)
    build(os.getcwd()).run("stdio")
