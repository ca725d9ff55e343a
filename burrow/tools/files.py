"""The file tools: `read_file`, `write_file`, `edit_file`, all confined to the workspace."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from burrow.llm.base import ToolSpec
from burrow.sandbox.backend import ErrorCode, SandboxError
from burrow.tools.arguments import json_schema, parse_arguments
from burrow.tools.base import ToolContext, ToolError, ToolKind, ToolResult

PATH_DESCRIPTION = "File path relative to the workspace (or absolute inside /workspace)."


def file_error(exc: SandboxError, path: str) -> Exception:
    """A sandbox file error as a message for the model; sandbox failures stay SandboxError."""
    messages = {
        ErrorCode.PATH_ESCAPE: f"Path '{path}' is outside the workspace; use a path inside "
        "/workspace.",
        ErrorCode.NOT_FOUND: f"File not found: {path}",
        ErrorCode.IS_A_DIRECTORY: f"{path} is a directory; list it with bash (`ls {path}`).",
        ErrorCode.NOT_A_DIRECTORY: f"A parent of {path} is a file, not a directory.",
        ErrorCode.PERMISSION_DENIED: f"Permission denied: {path}",
        ErrorCode.TOO_LARGE: f"{path} is too large to read whole: {exc.message}. Look at "
        "parts of it with bash (head, tail, sed -n, grep).",
    }
    message = messages.get(exc.code)
    return ToolError(message) if message else exc


def _decode_text(data: bytes, path: str, *, strict: bool = False) -> str:
    """The file as text; `strict` refuses bytes that are not UTF-8 (an edit would lose them)."""
    if b"\0" in data[:8192]:
        raise ToolError(
            f"{path} is a binary file ({len(data):,} bytes); inspect it with bash "
            "(e.g. `file`, `xxd | head`)."
        )
    try:
        return data.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not valid UTF-8; change it with bash instead.") from None


class ReadFileArguments(BaseModel):
    path: str = Field(description=PATH_DESCRIPTION)
    offset: int | None = Field(
        default=None, ge=1, description="First line to read, 1-based (default 1)."
    )
    limit: int | None = Field(default=None, ge=1, description="Number of lines to read.")


class ReadFileTool:
    spec = ToolSpec(
        name="read_file",
        description="Read a text file from the workspace. Returns up to 2000 lines by "
        "default; use offset and limit (in lines) to page through longer files.",
        parameters=json_schema(ReadFileArguments),
    )
    kind = ToolKind(reads=True)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = parse_arguments(ReadFileArguments, arguments, "read_file")
        sandbox = await ctx.sandbox()
        try:
            data = await sandbox.read_file(args.path)
        except SandboxError as exc:
            raise file_error(exc, args.path) from None
        lines = _decode_text(data, args.path).splitlines(keepends=True)
        if not lines:
            return ToolResult(output=f"({args.path} is empty)")
        first = args.offset or 1
        if first > len(lines):
            raise ToolError(
                f"offset {first} is past the end of {args.path}, which has {len(lines)} lines."
            )
        wanted = args.limit or ctx.limits.read_lines
        shown: list[str] = []
        chars = 0
        for line in lines[first - 1 : first - 1 + wanted]:
            if shown and chars + len(line) > ctx.limits.read_chars:
                break
            shown.append(line[: ctx.limits.read_chars])
            chars += len(line)
        last = first + len(shown) - 1
        text = "".join(shown)
        truncated = last < len(lines)
        if truncated:
            text = text.rstrip("\n") + (
                f"\n\n[Showing lines {first}-{last} of {len(lines)}. Call read_file with "
                f"offset={last + 1} to read more.]"
            )
        return ToolResult(output=text, truncated=truncated)


class WriteFileArguments(BaseModel):
    path: str = Field(description=PATH_DESCRIPTION)
    content: str = Field(description="The complete new content of the file.")


class WriteFileTool:
    spec = ToolSpec(
        name="write_file",
        description="Create a file or replace its whole content; parent directories are "
        "created. To change part of an existing file prefer edit_file.",
        parameters=json_schema(WriteFileArguments),
    )
    kind = ToolKind(reads=True, writes=True)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = parse_arguments(WriteFileArguments, arguments, "write_file")
        data = args.content.encode()
        sandbox = await ctx.sandbox()
        try:
            await sandbox.write_file(args.path, data)
        except SandboxError as exc:
            raise file_error(exc, args.path) from None
        lines = args.content.count("\n") + (0 if args.content.endswith("\n") else 1)
        lines = lines if args.content else 0
        return ToolResult(output=f"Wrote {len(data):,} bytes ({lines} lines) to {args.path}.")


class EditFileArguments(BaseModel):
    path: str = Field(description=PATH_DESCRIPTION)
    old_text: str = Field(
        description="Exact text to replace, including whitespace and indentation; it must "
        "occur exactly once in the file."
    )
    new_text: str = Field(description="The text to put in its place.")


class EditFileTool:
    spec = ToolSpec(
        name="edit_file",
        description="Replace one exact occurrence of old_text with new_text in a file. "
        "old_text must match exactly once: include enough surrounding lines to make it "
        "unique.",
        parameters=json_schema(EditFileArguments),
    )
    kind = ToolKind(reads=True, writes=True)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = parse_arguments(EditFileArguments, arguments, "edit_file")
        if not args.old_text:
            raise ToolError("old_text is empty; to create or overwrite a file use write_file.")
        sandbox = await ctx.sandbox()
        try:
            text = _decode_text(await sandbox.read_file(args.path), args.path, strict=True)
        except SandboxError as exc:
            raise file_error(exc, args.path) from None
        count = text.count(args.old_text)
        if count == 0:
            raise ToolError(
                f"old_text was not found in {args.path}. It must match the file exactly, "
                "including whitespace and indentation; read the file again and copy the text."
            )
        if count > 1:
            raise ToolError(
                f"old_text occurs {count} times in {args.path}; include more surrounding "
                "context in old_text so that it matches exactly once."
            )
        start = text.index(args.old_text)
        updated = text[:start] + args.new_text + text[start + len(args.old_text) :]
        try:
            await sandbox.write_file(args.path, updated.encode())
        except SandboxError as exc:
            raise file_error(exc, args.path) from None
        line = text.count("\n", 0, start) + 1
        return ToolResult(output=f"Edited {args.path}: replaced 1 occurrence at line {line}.")
