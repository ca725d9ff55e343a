"""An MCP server's tool as a Burrow tool: `mcp__<server>__<tool>`, judged by its annotations.

The MCP spec's defaults hold where a server says nothing: a tool is not read-only and may be
destructive, so an unannotated tool asks for approval. A tool that only reads is safe; a
read-only one that says it reaches an open world is a network tool. Results go through the
same output bounds as a command's (head and tail; the whole saved in the workspace).

A server with resources gets one more tool, `mcp__<server>__read_resource`: its
description names the server's resources (as many as fit), it takes a URI (a listed one, or
one of the server's templates filled in) and it only reads.
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
from burrow.tools.base import Tool, ToolContext, ToolError, ToolKind, ToolResult
from burrow.tools.bash import OUTPUT_LOG_DIR
from burrow.tools.mcp.session import McpSession
from burrow.tools.output import OutputBuffer

PREFIX = "mcp__"
MAX_NAME = 64  # what the model APIs accept as a tool name
MAX_DESCRIPTION = 2_000
MAX_TOOLS = 100  # per server: every tool's spec goes with every model request
MAX_SCHEMA_CHARS = 32_000  # an input schema larger than this is not offered
READ_RESOURCE = "read_resource"


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
) -> tuple[dict[str, Tool], list[str]]:
    """The server's tools as the model gets them, and why any were left out (a hostile or
    careless server must not fill every request with its specs)."""
    tools: dict[str, Tool] = {}
    left_out: list[str] = []
    for remote in session.tools:
        size = len(json.dumps(remote.input_schema))
        if size > MAX_SCHEMA_CHARS:
            left_out.append(f"{remote.name} (an input schema of {size:,} characters)")
            continue
        _add(tools, McpTool(server, remote, session, in_sandbox=in_sandbox), left_out)
    if session.reads_resources:  # after the server's own tools: a tool of that name wins
        _add(tools, McpResourceReader(server, session, in_sandbox=in_sandbox), left_out)
    return tools, left_out


def _add(tools: dict[str, Tool], tool: McpTool, left_out: list[str]) -> None:
    if tool.spec.name in tools:
        left_out.append(f"{tool.remote_name} (its name clashes with another tool's)")
    elif len(tools) >= MAX_TOOLS:
        left_out.append(f"{tool.remote_name} (more than {MAX_TOOLS} tools)")
    else:
        tools[tool.spec.name] = tool


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
                text, is_error = await self._answer(arguments)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.server!r} did not answer within {ctx.limits.max_timeout:g} s."
            ) from None
        except ToolError:
            raise
        except ConnectionError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:  # an error answer, or a broken connection
            raise ToolError(f"MCP server {self.server!r}: {_message(exc)}") from None
        return await bounded(text, is_error, self.server, ctx)

    async def _answer(self, arguments: dict[str, Any]) -> tuple[str, bool]:
        """The server's answer as text for the model, and whether it is an error."""
        result = await self._session.call(self.remote_name, arguments)
        return render(result), bool(result.is_error)


class McpResourceReader(McpTool):
    """`mcp__<server>__read_resource`: a resource of the server's, by URI, as text."""

    def __init__(self, server: str, session: McpSession, *, in_sandbox: bool = False) -> None:
        header = "Read one of this server's resources by its URI. Resources:\n"
        listed = [_line(r) for r in session.resources]
        shown: list[str] = []
        room = MAX_DESCRIPTION - len(header) - 30  # what a description may hold, and "more"
        for line in listed:
            if len(line) + 1 > room:
                shown.append(f"- ... and {len(listed) - len(shown)} more")
                break
            shown.append(line)
            room -= len(line) + 1
        names = "\n".join(shown) if shown else "(none listed: use a URI the server documents)"
        tool = types.Tool(
            name=READ_RESOURCE,
            description=header + names,
            input_schema={
                "type": "object",
                "properties": {"uri": {"type": "string", "description": "The resource's URI"}},
                "required": ["uri"],
            },
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        super().__init__(server, tool, session, in_sandbox=in_sandbox)

    async def _answer(self, arguments: dict[str, Any]) -> tuple[str, bool]:
        uri = arguments.get("uri")
        if not isinstance(uri, str) or not uri:
            raise ToolError(f"{READ_RESOURCE} needs `uri`: a resource its description lists.")
        result = await self._session.read(uri)
        return render_contents(result.contents), False


def _line(resource: types.Resource) -> str:
    about = (resource.description or resource.title or "")[:200]
    named = f" ({resource.name})" if resource.name and resource.name != resource.uri else ""
    return f"- {resource.uri}{named}" + (f": {about}" if about else "")


async def bounded(text: str, is_error: bool, server: str, ctx: ToolContext) -> ToolResult:
    """A result within the output bounds of a command's; the whole of a long one is saved
    in the workspace, where the model can read it."""
    output = OutputBuffer(ctx.limits.output_head, ctx.limits.output_tail)
    output.add(text)
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
        is_error=is_error,
        truncated=output.truncated,
        extra={"mcp_server": server},
    )


def render_contents(
    contents: list[types.TextResourceContents | types.BlobResourceContents],
) -> str:
    """A resource's contents as text: text as it is, a blob described."""
    parts = []
    for item in contents:
        if isinstance(item, types.TextResourceContents):
            parts.append(item.text)
        else:
            size = _decoded_size(item.blob)
            parts.append(f"[{item.mime_type or 'binary'} resource {item.uri}, {size} bytes]")
    return "\n".join(parts)


def render(result: types.CallToolResult) -> str:
    """The result as text for the model: text blocks as they are, others described."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type} {block.mime_type}, {_decoded_size(block.data)} bytes]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _decoded_size(base64_text: str) -> int:
    """The size of what base64 text holds, without decoding it."""
    return len(base64_text) * 3 // 4 - base64_text[-2:].count("=")


def _message(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return f"{exc.error.message} (error {exc.code})"
    return str(exc) or type(exc).__name__
