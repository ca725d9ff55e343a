"""E2B paths to Burrow sandbox paths, and Burrow's sandbox errors to E2B's wire errors.

E2B code writes to `/home/user` (the SDK's default user's home) or to paths relative to it.
The host's sandboxes have E2B's layout (local.py `home`): the workspace is mounted at
/home/user too, which is HOME and the commands' first cwd, and the file API serves the
sandbox's whole tree but /proc, /sys, /dev and the guest (guest/files.py). So a path is
the sandbox's own, relative ones are under /home/user, and what comes back names the
workspace /home/user, as E2B would.
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
        return E2B_HOME
    if len(path) > MAX_PATH_CHARS or "\x00" in path:
        raise BadPath(f"Path is not valid: at most {MAX_PATH_CHARS} characters and no NUL byte.")
    if path == "~" or path.startswith("~/"):
        path = E2B_HOME + path[1:]
    return posixpath.normpath(posixpath.join(E2B_HOME, path))


def absolute(path: str, workspace: str) -> str:
    """A FileEntry's path (workspace-relative, or absolute outside the workspace) as E2B
    names it: the workspace is /home/user."""
    whole = posixpath.normpath(posixpath.join(workspace, path))
    if whole == workspace or whole.startswith(workspace + "/"):
        return E2B_HOME + whole[len(workspace) :]
    return whole


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
