"""Burrow's MCP client as the client under test of the MCP conformance suite.

The suite starts a server for a scenario and runs this with its URL as the last argument
(`MCP_CONFORMANCE_SCENARIO` names the scenario). What runs is what a conversation's run
does: mcp.json names the server, `McpConnections` connects through the URL policy (the URL
listed, as an administrator lists a local server) and lists the tools, and each tool the
scenario expects is called through `McpTool.run`, standing in for the model's choice. The
results are printed; the suite judges the traffic.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from burrow.sandbox.backend import Sandbox
from burrow.tools.base import ToolContext
from burrow.tools.mcp.connections import McpConnections
from burrow.tools.mcp.outbound import UrlPolicy

# The calls each scenario's server waits for (by the tool's own name); none: list only.
CALLS: dict[str, dict[str, dict[str, Any]]] = {
    "initialize": {},
    "tools_call": {"add_numbers": {"a": 5, "b": 3}},
    "sse-retry": {"test_reconnection": {}},
    "elicitation-sep1034-client-defaults": {"test_client_elicitation_defaults": {}},
}


async def no_sandbox() -> Sandbox:
    raise AssertionError("an HTTP server needs no sandbox")


async def main(url: str, scenario: str) -> int:
    calls = CALLS.get(scenario, {})  # the rest: connect and list
    with tempfile.TemporaryDirectory() as data_dir:
        config = {"mcpServers": {"conformance": {"url": url}}}
        (Path(data_dir) / "mcp.json").write_text(json.dumps(config))

        async def secrets_of(cid: str) -> tuple[str, dict[str, str]]:
            return "conformance", {}

        async def sandbox_of(cid: str) -> Sandbox:
            return await no_sandbox()

        connections = McpConnections(
            Path(data_dir), sandbox=sandbox_of, secrets_of=secrets_of, policy=UrlPolicy([url])
        )
        try:
            tools, warnings = await connections.tools_for("conversation", "run")
            for warning in warnings.values():
                print(f"warning: {warning}", file=sys.stderr)
            if warnings:
                return 1  # not connected, or tools left out
            print("tools:", ", ".join(sorted(tools)))
            failed = False
            for tool in tools.values():
                arguments = calls.get(getattr(tool, "remote_name", ""))
                if arguments is None:
                    continue
                result = await tool.run(arguments, ToolContext(sandbox=no_sandbox, call_id="1"))
                print(f"{tool.spec.name} -> {result.output!r} (error: {result.is_error})")
                failed |= result.is_error
            return 1 if failed else 0
        finally:
            await connections.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[-1], os.environ["MCP_CONFORMANCE_SCENARIO"])))
