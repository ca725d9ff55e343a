"""E2B paths to Burrow sandbox paths, and Burrow's sandbox errors to E2B's wire errors.

E2B code writes to `/home/user` (the SDK's default user's home) or to paths relative to it;
a Burrow sandbox's home and first cwd is its workspace. So `/home/user` is an alias of the
workspace and relative paths are workspace-relative. Anything outside the workspace is
refused by the sandbox itself (PATH_ESCAPE), whatever the path says.
"""

from __future__ import annotations

import posixpath
from http import HTTPStatus

from connectrpc.code import Code

from burrow.sandbox.backend import ErrorCode

E2B_HOME = "/home/user"
MAX_PATH_CHARS = 4096


class BadPath(ValueError):
    pass


def sandbox_path(path: str, workspace: str) -> str:
    """The path inside the Burrow sandbox that an E2B path names."""
    if not path:
        return workspace
    if len(path) > MAX_PATH_CHARS or "\x00" in path:
        raise BadPath(f"Path is not valid: at most {MAX_PATH_CHARS} characters and no NUL byte.")
    if path == "~" or path.startswith("~/"):
        path = E2B_HOME + path[1:]
    if path == E2B_HOME or path.startswith(E2B_HOME + "/"):
        path = workspace + path[len(E2B_HOME) :]
    if not path.startswith("/"):
        path = posixpath.join(workspace, path)
    return posixpath.normpath(path)


def absolute(path: str, workspace: str) -> str:
    """A workspace-relative path (as Burrow's FileEntry gives them) made absolute."""
    return posixpath.normpath(posixpath.join(workspace, path))


_HTTP = {
    ErrorCode.PATH_ESCAPE: HTTPStatus.FORBIDDEN,
    ErrorCode.PERMISSION_DENIED: HTTPStatus.FORBIDDEN,
    ErrorCode.NOT_FOUND: HTTPStatus.NOT_FOUND,
    ErrorCode.IS_A_DIRECTORY: HTTPStatus.BAD_REQUEST,
    ErrorCode.NOT_A_FILE: HTTPStatus.BAD_REQUEST,
    ErrorCode.NOT_A_DIRECTORY: HTTPStatus.BAD_REQUEST,
    ErrorCode.INVALID_CWD: HTTPStatus.BAD_REQUEST,
    ErrorCode.EXEC_NOT_FOUND: HTTPStatus.BAD_REQUEST,
    ErrorCode.TOO_LARGE: HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    ErrorCode.TIMEOUT: HTTPStatus.GATEWAY_TIMEOUT,
    ErrorCode.UNAVAILABLE: HTTPStatus.BAD_GATEWAY,
    ErrorCode.CONNECTION_REFUSED: HTTPStatus.BAD_GATEWAY,
    ErrorCode.NOT_SUPPORTED: HTTPStatus.NOT_IMPLEMENTED,
}

_CONNECT = {
    ErrorCode.PATH_ESCAPE: Code.PERMISSION_DENIED,
    ErrorCode.PERMISSION_DENIED: Code.PERMISSION_DENIED,
    ErrorCode.NOT_FOUND: Code.NOT_FOUND,
    ErrorCode.IS_A_DIRECTORY: Code.INVALID_ARGUMENT,
    ErrorCode.NOT_A_FILE: Code.INVALID_ARGUMENT,
    ErrorCode.NOT_A_DIRECTORY: Code.INVALID_ARGUMENT,
    ErrorCode.INVALID_CWD: Code.INVALID_ARGUMENT,
    ErrorCode.EXEC_NOT_FOUND: Code.INVALID_ARGUMENT,
    ErrorCode.TOO_LARGE: Code.RESOURCE_EXHAUSTED,
    ErrorCode.TIMEOUT: Code.DEADLINE_EXCEEDED,
    ErrorCode.UNAVAILABLE: Code.UNAVAILABLE,
    ErrorCode.CONNECTION_REFUSED: Code.UNAVAILABLE,
    ErrorCode.NOT_SUPPORTED: Code.UNIMPLEMENTED,
}


def http_status(code: ErrorCode) -> int:
    return int(_HTTP.get(code, HTTPStatus.INTERNAL_SERVER_ERROR))


def connect_code(code: ErrorCode) -> Code:
    return _CONNECT.get(code, Code.INTERNAL)
