"""One host request's connection, as a long-running request (a command, a terminal) sees
it: frames out while the host listens, frames in until it hangs up."""

from __future__ import annotations

import _socket

from . import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RECEIVE_BYTES = 64 * 1024


class Request:
    def __init__(
        self,
        conn: _socket.socket,
        decoder: protocol.FrameDecoder,
        backlog: list[protocol.Frame],
        header: dict[str, Any],
        workspace_root: str,
    ) -> None:
        self.conn = conn
        self.decoder = decoder
        self.backlog = backlog  # frames that arrived together with the request
        self.header = header
        self.workspace_root = workspace_root
        self.host_connected = True

    def _send(self, data: bytes) -> None:
        """Send unless the host has left; a failed send means it has."""
        if not self.host_connected:
            return
        try:
            self.conn.sendall(data)
        except OSError:
            self.host_connected = False

    def _receive(self) -> list[protocol.Frame] | None:
        """The frames the host sent; None once it hung up (or sent something unreadable)."""
        try:
            data = self.conn.recv(RECEIVE_BYTES)
            frames = self.decoder.feed(data) if data else []
        except (OSError, protocol.ProtocolError):
            data = b""
        if not data:
            self.host_connected = False
            return None
        return frames
