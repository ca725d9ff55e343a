"""The wire protocol between Burrow and the guest inside a sandbox.

Stdlib only: this module is imported by the in-sandbox guest (Debian's python3, no
site-packages) and by the host client, so there is one definition of the framing.

A frame is `u32 header length | u32 payload length | JSON header | raw payload`, all
lengths big-endian. The header is a JSON object with a `kind`; the payload carries bytes
(process output, file contents) untouched, so binary data never goes through JSON.

Each connection carries one request: the client sends `hello` and then its request; the
guest answers `hello` (or a fatal `error` when the major versions differ) and then the
response frames. An exec connection stays open for `stdin`/`signal` frames until `exit`.
"""

from __future__ import annotations

import struct

# The guest starts on every sandbox boot, and its handshake gates the sandbox's readiness:
# typing, and json (with re and enum under it) would cost that start milliseconds. json is
# imported where a frame other than the hello is encoded or decoded.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROTOCOL_VERSION = (1, 3)  # (major, minor); a different major is refused with PROTOCOL
# 1.3: `spawn` takes `background: true` (a long-lived helper such as an MCP server, fed by
# `stdin` frames for as long as it runs, and not counted as a running command).
FEATURES = (
    "exec",
    "stdin",
    "signal",
    "files",
    "result_file",
    "tunnel",
    "pty",
    "busy",
    "background",
)

# Requests (host -> guest)
HELLO = "hello"
PING = "ping"
SPAWN = "spawn"  # `argv`, `cwd`, `env`, `timeout`, `stdin`, `result_file`, `background`
STDIN = "stdin"  # payload = bytes for the process; header `eof: true` closes its stdin
SIGNAL = "signal"  # `signal`: number, delivered to the command's whole process group
READ = "read"
WRITE = "write"
LIST = "list"
STAT = "stat"
TUNNEL = "tunnel"  # `port`: connect to 127.0.0.1:port in the sandbox, then raw bytes
PTY_OPEN = "pty_open"  # `cols`, `rows`, `argv`?, `cwd`?: a shell on a new pseudo-terminal;
# then `stdin` frames are keystrokes, `resize` frames change the window, `signal` frames
# reach the session; the guest streams `stdout` frames and ends with `exit`
RESIZE = "resize"  # `cols`, `rows`
# Responses (guest -> host)
PONG = "pong"
STDOUT = "stdout"
STDERR = "stderr"
EXIT = "exit"  # `exit_code`, `signal`, `timed_out`, `result` (see SPAWN `result_file`)
ERROR = "error"  # `code` (one of ERROR_CODES), `message`, `fatal`
READ_RESULT = "read_result"  # payload = the bytes read; `size` = the file's full size
WRITE_RESULT = "write_result"  # `entry`
LIST_RESULT = "list_result"  # `entries`
STAT_RESULT = "stat_result"  # `entry`
TUNNEL_OPEN = "tunnel_open"  # connected; from here on the connection carries raw bytes
PTY_STARTED = "pty_started"  # `pid` of the shell (inside the sandbox's pid namespace)

FRAME_KINDS = frozenset(
    {
        HELLO,
        PING,
        SPAWN,
        STDIN,
        SIGNAL,
        READ,
        WRITE,
        LIST,
        STAT,
        PONG,
        STDOUT,
        STDERR,
        EXIT,
        ERROR,
        READ_RESULT,
        WRITE_RESULT,
        LIST_RESULT,
        STAT_RESULT,
        TUNNEL,
        TUNNEL_OPEN,
        PTY_OPEN,
        RESIZE,
        PTY_STARTED,
    }
)

# The string values of burrow.sandbox.backend.ErrorCode (a test keeps the two equal);
# duplicated because the guest cannot import the host package.
ERROR_CODES = frozenset(
    {
        "path_escape",
        "not_found",
        "is_a_directory",
        "not_a_file",
        "not_a_directory",
        "invalid_cwd",
        "exec_not_found",
        "timeout",
        "too_large",
        "permission_denied",
        "protocol",
        "unavailable",
        "boot_failed",
        "not_supported",
        "internal",
        "connection_refused",
    }
)

PREFIX = struct.Struct("!II")
MAX_HEADER_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 64 << 20
MAX_READ_BYTES = 32 << 20  # largest single file read; larger reads need offset/limit


class ProtocolError(Exception):
    """The peer sent something that is not a valid frame."""


class GuestError(Exception):
    """A request failed with one of ERROR_CODES."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Frame:
    __slots__ = ("header", "payload")

    def __init__(self, header: dict[str, Any], payload: bytes = b"") -> None:
        self.header = header
        self.payload = payload

    @property
    def kind(self) -> str:
        return str(self.header["kind"])

    def __repr__(self) -> str:
        return f"Frame({self.header!r}, {len(self.payload)} bytes)"


def encode_frame(kind: str, payload: bytes = b"", **fields: Any) -> bytes:
    import json

    if kind not in FRAME_KINDS:
        raise ProtocolError(f"unknown frame kind {kind!r}")
    header = json.dumps({"kind": kind, **fields}, separators=(",", ":")).encode()
    return _frame(kind, header, payload)


def _frame(kind: str, header: bytes, payload: bytes) -> bytes:
    if len(header) > MAX_HEADER_BYTES or len(payload) > MAX_PAYLOAD_BYTES:
        raise ProtocolError(f"{kind} frame is too large ({len(header)}+{len(payload)} bytes)")
    return PREFIX.pack(len(header), len(payload)) + header + payload


def error_frame(code: str, message: str, *, fatal: bool = False) -> bytes:
    return encode_frame(ERROR, code=code, message=message, fatal=fatal)


def _hello_header(version: tuple[int, int]) -> bytes:
    """The hello's header, written out: what `encode_frame` would give, without json (a
    test keeps the two equal). Host and guest send the same hello."""
    features = ",".join(f'"{name}"' for name in FEATURES)
    return (
        f'{{"kind":"{HELLO}","version":[{version[0]},{version[1]}],"features":[{features}]}}'
    ).encode()


_HELLO_HEADER = _hello_header(PROTOCOL_VERSION)


def hello_frame(version: tuple[int, int] = PROTOCOL_VERSION) -> bytes:
    header = _HELLO_HEADER if version == PROTOCOL_VERSION else _hello_header(version)
    return _frame(HELLO, header, b"")


def check_hello(frame: Frame) -> None:
    """Raise ProtocolError unless `frame` is a hello with our major version."""
    if frame.kind != HELLO:
        raise ProtocolError(f"expected a hello frame first, got {frame.kind!r}")
    version = frame.header.get("version")
    if not isinstance(version, list) or len(version) != 2:
        raise ProtocolError(f"hello carries no valid version: {version!r}")
    if version[0] != PROTOCOL_VERSION[0]:
        ours = ".".join(map(str, PROTOCOL_VERSION))
        theirs = ".".join(map(str, version))
        raise ProtocolError(
            f"protocol version {theirs} is not compatible with {ours}; "
            "restart the sandbox so host and agent run the same Burrow version"
        )


class FrameDecoder:
    """Turns a byte stream into frames; feed it whatever the socket returned."""

    def __init__(self, max_payload: int = MAX_PAYLOAD_BYTES) -> None:
        self._buffer = bytearray()
        self.max_payload = max_payload  # checked from a frame's prefix, before buffering it

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= PREFIX.size:
            header_len, payload_len = PREFIX.unpack_from(self._buffer)
            if header_len > MAX_HEADER_BYTES or payload_len > self.max_payload:
                raise ProtocolError(f"frame too large ({header_len}+{payload_len} bytes)")
            end = PREFIX.size + header_len + payload_len
            if len(self._buffer) < end:
                break
            raw_header = bytes(self._buffer[PREFIX.size : PREFIX.size + header_len])
            payload = bytes(self._buffer[PREFIX.size + header_len : end])
            del self._buffer[:end]
            frames.append(Frame(_parse_header(raw_header), payload))
        return frames

    def take_pending(self) -> bytes:
        """The bytes after the last whole frame (a tunnel's first raw bytes), removed."""
        rest = bytes(self._buffer)
        self._buffer.clear()
        return rest

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame still waiting for the rest."""
        return len(self._buffer)


def _parse_header(raw: bytes) -> dict[str, Any]:
    if raw == _HELLO_HEADER:  # the peer's hello, byte for byte our own: no json needed
        return {"kind": HELLO, "version": list(PROTOCOL_VERSION), "features": list(FEATURES)}
    import json

    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise ProtocolError(f"frame header is not JSON: {exc}") from None
    if not isinstance(header, dict) or header.get("kind") not in FRAME_KINDS:
        raise ProtocolError(f"frame header has no known kind: {raw[:200]!r}")
    return header
