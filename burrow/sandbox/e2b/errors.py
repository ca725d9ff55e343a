"""E2B SDK failures as Burrow's typed sandbox errors.

The SDK raises its own exception classes over REST and envd's HTTP API, and Connect errors
over envd's RPCs; a Burrow caller sees one `SandboxError` with a code it can act on and the
remote side's own words.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from e2b import exceptions as sdk

from burrow.sandbox.backend import ErrorCode, SandboxError

_CONNECT_CODES = {
    Code.NOT_FOUND: ErrorCode.NOT_FOUND,
    Code.INVALID_ARGUMENT: ErrorCode.PROTOCOL,
    Code.DEADLINE_EXCEEDED: ErrorCode.TIMEOUT,
    Code.PERMISSION_DENIED: ErrorCode.PERMISSION_DENIED,
    Code.UNAUTHENTICATED: ErrorCode.PERMISSION_DENIED,
    Code.RESOURCE_EXHAUSTED: ErrorCode.TOO_LARGE,
    Code.UNIMPLEMENTED: ErrorCode.NOT_SUPPORTED,
    Code.UNAVAILABLE: ErrorCode.UNAVAILABLE,
}

# A remote side that speaks Burrow's vocabulary (burrow sandbox-host) says so in its words;
# envd's own messages name the same causes differently.
_WORDS = (
    ("code.unimplemented", ErrorCode.NOT_SUPPORTED),  # the SDK's words for UNIMPLEMENTED
    ("outside the workspace", ErrorCode.PATH_ESCAPE),
    ("path_escape", ErrorCode.PATH_ESCAPE),
    ("not a regular file", ErrorCode.NOT_A_FILE),
    ("is a directory", ErrorCode.IS_A_DIRECTORY),
    ("not a directory", ErrorCode.NOT_A_DIRECTORY),
    ("invalid_cwd", ErrorCode.INVALID_CWD),
    ("working directory", ErrorCode.INVALID_CWD),
    ("exec_not_found", ErrorCode.EXEC_NOT_FOUND),
    ("executable file not found", ErrorCode.EXEC_NOT_FOUND),
    ("command not found", ErrorCode.EXEC_NOT_FOUND),
    ("too_large", ErrorCode.TOO_LARGE),
    ("too large", ErrorCode.TOO_LARGE),
    ("no such file or directory", ErrorCode.NOT_FOUND),
)


def from_sdk(exc: BaseException, doing: str) -> SandboxError:
    """The SandboxError for an exception the SDK raised while `doing` something."""
    if isinstance(exc, SandboxError):
        return exc
    message = str(getattr(exc, "message", "") or exc) or type(exc).__name__
    lowered = message.lower()
    for words, word_code in _WORDS:
        if words in lowered:
            return SandboxError(word_code, message)
    code = ErrorCode.INTERNAL
    if isinstance(exc, ConnectError):
        code = _CONNECT_CODES.get(exc.code, ErrorCode.INTERNAL)
    elif isinstance(exc, (sdk.SandboxNotFoundException, sdk.SandboxNotRunningException)):
        code = ErrorCode.UNAVAILABLE
    elif isinstance(exc, sdk.NotFoundException):
        code = ErrorCode.NOT_FOUND
    elif isinstance(exc, sdk.NotEnoughSpaceException):
        code = ErrorCode.TOO_LARGE
    elif isinstance(exc, sdk.TimeoutException):
        code = ErrorCode.TIMEOUT
    elif isinstance(exc, sdk.AuthenticationException):
        code = ErrorCode.PERMISSION_DENIED
    elif isinstance(exc, (sdk.SandboxUnreachableException, OSError)):
        code = ErrorCode.UNAVAILABLE
    return SandboxError(code, f"E2B could not {doing}: {message}")


@contextlib.contextmanager
def mapped(doing: str) -> Iterator[None]:
    """Raise what the SDK raises inside the block as a SandboxError."""
    try:
        yield
    except SandboxError:
        raise
    except Exception as exc:  # the SDK raises many unrelated classes (httpx, Connect, its own)
        # connectrpc turns a cancellation of the waiting task into ConnectError(CANCELED):
        # it stays a cancellation, or an interrupted run would see a sandbox failure.
        task = asyncio.current_task()
        cancelled = task is not None and task.cancelling() > 0
        if cancelled and isinstance(exc, ConnectError) and exc.code == Code.CANCELED:
            raise asyncio.CancelledError() from exc
        raise from_sdk(exc, doing) from exc
