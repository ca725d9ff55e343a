"""A dev-server stand-in run inside the sandbox (stdlib only): one port serves a page and
a hot-reload WebSocket, as Vite does.

WebSocket: echoes every text or binary message and answers a close with a close; on
/handshake it first sends the raw handshake request it received, as text.
HTTP (one request per connection): GET / is a page, POST /notes keeps the body,
GET /notes/add?text=T keeps T (a GET that changes state, as some apps have),
GET /notes lists what was kept (JSON).
"""

import base64
import hashlib
import json
import socket
import struct
import sys
import threading
from urllib.parse import unquote

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PAGE = b"<!doctype html><title>dev</title><p id=ready>dev server</p>"
notes = []


def read_exactly(conn, n):
    data = b""
    while len(data) < n:
        part = conn.recv(n - len(data))
        if not part:
            raise EOFError
        data += part
    return data


def frame(opcode, payload):
    head = bytes([0x80 | opcode])
    if len(payload) < 126:
        head += bytes([len(payload)])
    elif len(payload) < 1 << 16:
        head += bytes([126]) + struct.pack("!H", len(payload))
    else:
        head += bytes([127]) + struct.pack("!Q", len(payload))
    return head + payload


def answer_http(conn, method, path, headers, rest):
    if method == b"POST" and path == b"/notes":
        body = rest + read_exactly(conn, int(headers.get(b"content-length", b"0")) - len(rest))
        notes.append(body.decode())
        status, content_type, body = b"200 OK", b"text/plain", b"noted"
    elif path.startswith(b"/notes/add?text="):
        notes.append(unquote(path.partition(b"=")[2].decode()))
        status, content_type, body = b"200 OK", b"text/plain", b"noted"
    elif path == b"/notes":
        status, content_type, body = b"200 OK", b"application/json", json.dumps(notes).encode()
    else:
        status, content_type, body = b"200 OK", b"text/html", PAGE
    conn.sendall(
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: "
        + content_type
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\nConnection: close\r\n\r\n"
        + body
    )


def serve_websocket(conn, path, request, headers):
    accept = base64.b64encode(hashlib.sha1(headers[b"sec-websocket-key"] + GUID).digest())
    reply = (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n"
    )
    if b"sec-websocket-protocol" in headers:
        chosen = headers[b"sec-websocket-protocol"].split(b",")[0].strip()
        reply += b"Sec-WebSocket-Protocol: " + chosen + b"\r\n"
    conn.sendall(reply + b"\r\n")
    if path == b"/handshake":
        conn.sendall(frame(1, request))
    while True:
        b1, b2 = read_exactly(conn, 2)
        opcode, length = b1 & 0x0F, b2 & 0x7F
        if length == 126:
            length = struct.unpack("!H", read_exactly(conn, 2))[0]
        elif length == 127:
            length = struct.unpack("!Q", read_exactly(conn, 8))[0]
        mask = read_exactly(conn, 4)
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(read_exactly(conn, length)))
        if opcode == 8:
            conn.sendall(frame(8, data[:2]))
            return
        if opcode in (1, 2):
            conn.sendall(frame(opcode, data))


def serve(conn):
    try:
        received = b""
        while b"\r\n\r\n" not in received:
            part = conn.recv(4096)
            if not part:
                return
            received += part
        request, _, rest = received.partition(b"\r\n\r\n")
        lines = request.split(b"\r\n")
        method, path = lines[0].split(b" ")[:2]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if headers.get(b"upgrade", b"").lower() == b"websocket":
            serve_websocket(conn, path, request + b"\r\n\r\n", headers)
        else:
            answer_http(conn, method, path, headers, rest)
    except (EOFError, OSError):
        pass
    finally:
        conn.close()


listener = socket.create_server(("0.0.0.0", int(sys.argv[1])))
while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
