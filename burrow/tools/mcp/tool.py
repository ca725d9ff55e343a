"""An MCP server's tool as a Burrow tool: `mcp__<server>__<tool>`, judged by its annotations.

The MCP spec's defaults hold where a server says nothing: a tool is not read-only and may be
destructive, so an unannotated tool asks for approval. A tool that only reads is safe; a
read-only one that says it reaches an open world is a network tool. Results go through the
same output bounds as a command's (head and tail; the whole saved in the workspace).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from burrow.llm.base import ToolSpec
from burrow.sandbox.backend import SandboxError
from burrow.tools.base import ToolContext, ToolError, ToolKind, ToolResult
from burrow.tools.bash import OUTPUT_LOG_DIR
from burrow.tools.mcp.session import McpSession
from burrow.tools.output import OutputBuffer

PREFIX = "mcp__"
MAX_NAME = 64  # what the model APIs accept as a tool name
MAX_DESCRIPTION = 2_000
MAX_TOOLS = 100  # per server: every tool's spec goes with every model request
MAX_SCHEMA_CHARS = 32_000  # an input schema larger than this is not offered


def tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, with characters model APIs refuse replaced."""
    return (PREFIX + server + "__" + re.sub(r"[^A-Za-z0-9_-]", "_", tool))[:MAX_NAME]


def kind_of(annotations: types.ToolAnnotations | None) -> ToolKind:
    hints = annotations or types.ToolAnnotations()
    if hints.read_only_hint is True:
        return ToolKind(reads=True, network=hints.open_world_hint is True)
    return ToolKind(
        writes=True,
        destructive=hints.destructive_hint is not False,
        network=hints.open_world_hint is True,
    )


def offered(
    server: str, session: McpSession, *, in_sandbox: bool = False
) -> tuple[dict[str, McpTool], list[str]]:
    """The server's tools as the model gets them, and why any were left out (a hostile or
    careless server must not fill every request with its specs)."""
    tools: dict[str, McpTool] = {}
    left_out: list[str] = []
    for remote in session.tools:
        size = len(json.dumps(remote.input_schema))
        if size > MAX_SCHEMA_CHARS:
            left_out.append(f"{remote.name} (an input schema of {size:,} characters)")
            continue
        tool = McpTool(server, remote, session, in_sandbox=in_sandbox)
        if tool.spec.name in tools:
            left_out.append(f"{remote.name} (its name clashes with another tool's)")
        elif len(tools) >= MAX_TOOLS:
            left_out.append(f"{remote.name} (more than {MAX_TOOLS} tools)")
        else:
            tools[tool.spec.name] = tool
    return tools, left_out


class McpTool:
    def __init__(
        self, server: str, tool: types.Tool, session: McpSession, *, in_sandbox: bool = False
    ) -> None:
        self.server = server
        self.remote_name = tool.name
        self._session = session
        self._in_sandbox = in_sandbox  # its calls are use of the sandbox (the idle timer)
        description = (tool.description or tool.title or tool.name)[:MAX_DESCRIPTION]
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
        self._spec = ToolSpec(
            name=tool_name(server, tool.name),
            description=f"[MCP server {server}] {description}",
            parameters={"type": "object", **schema},
        )
        self._kind = kind_of(tool.annotations)

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    @property
    def kind(self) -> ToolKind:
        return self._kind

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if self._in_sandbox:
            await ctx.sandbox()  # counts as use: no hibernation under a long call
        try:
            async with asyncio.timeout(ctx.limits.max_timeout):
                result = await self._session.call(self.remote_name, arguments)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.server!r} did not answer within {ctx.limits.max_timeout:g} s."
            ) from None
        except ConnectionError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:  # an error answer, or a broken connection
            raise ToolError(f"MCP server {self.server!r}: {_message(exc)}") from None
        output = OutputBuffer(ctx.limits.output_head, ctx.limits.output_tail)
        output.add(render(result))
        log_path = None
        if output.truncated:
            log_path = f"{OUTPUT_LOG_DIR}/{re.sub(r'[^A-Za-z0-9_.-]', '_', ctx.call_id)}.log"
            try:
                sandbox = await ctx.sandbox()
                await sandbox.write_file(log_path, output.full_text().encode())
            except SandboxError:
                log_path = None
        return ToolResult(
            output=output.for_model(log_path),
            is_error=bool(result.is_error),
            truncated=output.truncated,
            extra={"mcp_server": self.server},
        )


def render(result: types.CallToolResult) -> str:
    """The result as text for the model: text blocks as they are, others described."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type} {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _message(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return f"{exc.error.message} (error {exc.code})"
    return str(exc) or type(exc).__name__
