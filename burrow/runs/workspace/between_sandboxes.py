"""A file copied from one sandbox into another through the sandbox API, never the host's disk.

The source is read in bounded chunks (`Sandbox.read_file`) and each chunk appended to the
target by a command in the target sandbox, so the server holds one chunk at a time and
never opens either sandbox's files itself: both ends are files the sandboxed code may
have shaped (a link, a FIFO), and only the sandboxes' own agents touch them. A file larger
than the caller's bound is refused before a byte is copied.
"""

from __future__ import annotations

from burrow.sandbox.backend import (
    ErrorCode,
    ExecExit,
    ExecRequest,
    Sandbox,
    SandboxError,
    closing_exec,
)

CHUNK_BYTES = 16 << 20  # per copy: memory held, well under a frame's limit


class TooLarge(Exception):
    """The file is larger than the caller allows; `size` and `limit` in bytes."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes, over the limit of {limit}")
        self.size = size
        self.limit = limit


async def copy_file(
    origin: Sandbox,
    source: str,
    target: Sandbox,
    destination: str,
    *,
    what: str,
    max_bytes: int | None = None,
) -> int:
    """Copy `source` (workspace-relative in `origin`) to `destination` (absolute in
    `target`, parents made); the bytes copied. `what` names the copy in errors."""
    size = (await origin.stat(source)).size
    if max_bytes is not None and size > max_bytes:
        raise TooLarge(size, max_bytes)
    await run_in(target, 'mkdir -p "${1%/*}" && : > "$1"', destination, what=what)
    offset = 0
    while offset < size:
        chunk = await origin.read_file(source, offset, min(CHUNK_BYTES, size - offset))
        if not chunk:
            raise SandboxError(ErrorCode.INTERNAL, f"{what}: the file shrank while copied.")
        await run_in(target, 'cat >> "$1"', destination, stdin=chunk, what=what)
        offset += len(chunk)
    return size


async def run_in(
    sandbox: Sandbox, script: str, arg: str, *, what: str, stdin: bytes | None = None
) -> None:
    """`sh -c script sh arg` in `sandbox`; a non-zero exit is a SandboxError naming `what`."""
    request = ExecRequest(argv=["sh", "-c", script, "sh", arg], stdin=stdin, timeout=120)
    async with closing_exec(sandbox.exec(request)) as events:
        async for item in events:
            if isinstance(item, ExecExit) and item.exit_code != 0:
                raise SandboxError(
                    ErrorCode.INTERNAL,
                    f"{what} failed (exit {item.exit_code}): the sandbox needs room on its disk.",
                )
