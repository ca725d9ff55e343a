"""Archives in and out of a workspace: unpack an uploaded zip, tar.gz or git bundle, and
stream the workspace as a zip or tar.gz.

Both run inside the conversation's sandbox (runs/workspace/in_sandbox/): the host never opens a path
an archive names, nor follows a link the workspace holds. The host only writes the
uploaded bytes through the sandbox's file API, starts the script, and reads its answer
or its output stream.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

from burrow.runs.workspace.in_sandbox import source
from burrow.sandbox.backend import (
    ErrorCode,
    ExecChunk,
    ExecEvent,
    ExecExit,
    ExecRequest,
    Sandbox,
    SandboxError,
    closing_exec,
)

ArchiveKind = Literal["zip", "tar", "bundle"]
ArchiveFormat = Literal["zip", "tar.gz"]

IMPORTS = ".burrow/imports"  # staging folders of unpacks under way
# Left out of downloads: Burrow's internals (DESIGN.md §8) and unpacks under way.
INTERNALS = (
    ".burrow/outputs",
    ".burrow/services",
    ".burrow/services.json",
    ".burrow/checkpoints",
    IMPORTS,
)
MAX_PATH_BYTES = 1024  # per member path
LISTED_FILES = 1000  # paths an unpack answers with; `total` counts them all
UNPACK_TIMEOUT_SECONDS = 600.0
PACK_TIMEOUT_SECONDS = 3600.0
MAX_ANSWER_BYTES = 4 << 20


class Refused(Exception):
    """The archive broke a rule (named by `code`); nothing of it was written."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class UnpackLimits:
    max_bytes: int  # uncompressed, all members together
    max_files: int


@dataclass(frozen=True)
class Unpacked:
    files: list[str]  # workspace-relative, the first LISTED_FILES
    total: int


def kind_of(filename: str) -> ArchiveKind | None:
    name = filename.lower()
    if name.endswith(".zip"):
        return "zip"
    if name.endswith((".tar.gz", ".tgz")):
        return "tar"
    if name.endswith(".bundle"):
        return "bundle"
    return None


def _python(script: str, args: dict[str, object]) -> list[str]:
    # -I: nothing from the workspace or the environment is imported in place of the stdlib.
    return ["python3", "-I", "-c", source(script), json.dumps(args)]


async def unpack(
    sandbox: Sandbox, data: bytes, kind: ArchiveKind, target: str, limits: UnpackLimits
) -> Unpacked:
    """Unpack `data` into the workspace folder `target` ("" = the workspace itself)."""
    staging = f"{IMPORTS}/{secrets.token_hex(8)}"
    await sandbox.write_file(f"{staging}/archive", data)
    argv = _python(
        "unpack",
        {
            "workspace": sandbox.workspace,
            "staging": staging,
            "kind": kind,
            "target": target,
            "max_bytes": limits.max_bytes,
            "max_files": limits.max_files,
            "max_path": MAX_PATH_BYTES,
            "list_limit": LISTED_FILES,
            "internal": [p for p in INTERNALS if p != ".burrow/services.json"],
        },
    )
    out, err = bytearray(), bytearray()
    request = ExecRequest(argv=argv, timeout=UNPACK_TIMEOUT_SECONDS)
    async with closing_exec(sandbox.exec(request)) as events:
        async for item in events:
            if isinstance(item, ExecChunk):
                target_buffer = out if item.stream == "stdout" else err
                if len(target_buffer) < MAX_ANSWER_BYTES:
                    target_buffer += item.data
            elif isinstance(item, ExecExit):
                try:
                    answer = json.loads(out)
                except ValueError:
                    detail = err.decode(errors="replace").strip()[-500:]
                    raise SandboxError(
                        ErrorCode.INTERNAL,
                        f"Unpacking failed in the sandbox (exit {item.exit_code}"
                        f"{', timed out' if item.timed_out else ''}): {detail or 'no message'}",
                    ) from None
                if "error" in answer:
                    raise Refused(str(answer["error"]["code"]), str(answer["error"]["message"]))
                return Unpacked([str(f) for f in answer["files"]], int(answer["total"]))
    raise SandboxError(ErrorCode.UNAVAILABLE, "The sandbox ended before unpacking finished.")


async def pack(sandbox: Sandbox, fmt: ArchiveFormat) -> AsyncIterator[bytes]:
    """The workspace as a `fmt` archive, in pieces as the sandbox writes them.

    The first piece is awaited before this returns, so a sandbox that cannot pack at all
    fails here (the caller can still answer with an error) rather than mid-download.
    """
    argv = _python(
        "pack", {"workspace": sandbox.workspace, "format": fmt, "excluded": list(INTERNALS)}
    )
    events = sandbox.exec(ExecRequest(argv=argv, timeout=PACK_TIMEOUT_SECONDS))
    first = b""
    err = bytearray()
    try:
        async for item in events:
            if isinstance(item, ExecChunk):
                if item.stream == "stdout":
                    first = item.data
                    break
                err += item.data[:4096]
            elif isinstance(item, ExecExit):
                detail = err.decode(errors="replace").strip()[-500:]
                raise SandboxError(
                    ErrorCode.INTERNAL,
                    f"Packing the workspace failed in the sandbox (exit {item.exit_code}): "
                    f"{detail or 'no output'}",
                )
    except BaseException:
        async with closing_exec(events):
            pass  # kills the packer
        raise
    return _rest(first, events)


async def _rest(first: bytes, events: AsyncIterator[ExecEvent]) -> AsyncIterator[bytes]:
    """`first`, then the packer's output. The exec is driven by a task of its own, a few
    pieces ahead at most: a download the browser abandons cancels the response's scope,
    whose cancellation repeats at every await (anyio) and would cut short the exec's own
    clean-up; cancelling this task instead lets it hang up on the packer (which is killed)."""
    pieces: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=4)

    async def produce() -> None:
        try:
            async with closing_exec(events) as stream:
                async for item in stream:
                    if isinstance(item, ExecChunk) and item.stream == "stdout":
                        await pieces.put(item.data)
        except (SandboxError, OSError):
            pass  # the sandbox went away mid-download: the archive ends here, cut short
        await pieces.put(None)

    task = asyncio.create_task(produce(), name="workspace archive")
    try:
        yield first
        while (piece := await pieces.get()) is not None:
            yield piece
    finally:
        task.cancel()
