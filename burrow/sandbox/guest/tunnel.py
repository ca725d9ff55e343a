"""A TCP tunnel: the guest connects to a port inside the sandbox and pipes bytes both ways.

The guest runs in the sandbox's network namespace, so `127.0.0.1:<port>` is the sandbox's
own loopback: a service there is reached without ever opening a port on the host. After
the `tunnel_open` answer the connection stops carrying frames and becomes the raw byte
stream (like HTTP CONNECT), so a proxied body costs no framing and no copy into JSON.
Each direction has its own thread: a blocking send in one never stalls the other.
"""

from __future__ import annotations

import _socket
import _thread
import socket

from . import protocol
from .protocol import GuestError

TYPE_CHECKING = False  # typing is not imported at run time (see protocol.py)
if TYPE_CHECKING:
    from typing import Any

CONNECT_TIMEOUT = 5.0
CHUNK_BYTES = 256 * 1024


def open_tunnel(conn: _socket.socket, header: dict[str, Any], pending: bytes) -> None:
    """Serve one tunnel until both directions have ended; `pending` = bytes the host sent
    after its request frame (already read from `conn`), forwarded first.

    The upstream may half-close (its end is passed on and the host can still send); the
    host's end closes the whole tunnel, so no thread waits on a server that ignores EOF.
    """
    port = header.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise GuestError("protocol", f"tunnel port must be an integer 1-65535, not {port!r}")
    upstream = _connect(port)
    try:
        upstream.settimeout(None)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(protocol.encode_frame(protocol.TUNNEL_OPEN, port=port))
        if pending:
            upstream.sendall(pending)
        done = _thread.allocate_lock()
        done.acquire()
        _thread.start_new_thread(_pipe_then_release, (upstream, conn, done))
        _pipe(conn, upstream)
        _shutdown(upstream)  # wakes the other direction's thread
        done.acquire()
    finally:
        upstream.close()


def _connect(port: int) -> socket.socket:
    # IPv4 first, then IPv6: Node resolves "localhost" to ::1, so dev servers started
    # without --host may listen there only.
    for address in ("127.0.0.1", "::1"):
        try:
            return socket.create_connection((address, port), timeout=CONNECT_TIMEOUT)
        except ConnectionRefusedError:
            continue
        except OSError as exc:
            if address == "::1":  # no IPv6 loopback in this sandbox
                break
            raise GuestError("unavailable", f"cannot connect to port {port}: {exc}") from None
    raise GuestError("connection_refused", f"nothing is listening on port {port} in the sandbox")


def _pipe_then_release(
    source: _socket.socket, sink: _socket.socket, done: _thread.LockType
) -> None:
    try:
        _pipe(source, sink)
    finally:
        done.release()


def _pipe(source: _socket.socket, sink: _socket.socket) -> None:
    """Copy until `source` ends, then pass the end on; on an error tear down both sockets
    so that the other direction's thread wakes up too."""
    buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)
    try:
        while True:
            received = source.recv_into(buffer)
            if not received:
                break
            sink.sendall(view[:received])
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        _shutdown(source)
        _shutdown(sink)


def _shutdown(sock: _socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
