"""WebSocket pass-through (dev-server hot reload): the browser's socket, ended by the
ASGI server, relayed message by message to a socket the proxy opens to the service.

The upstream side is websockets' sans-I/O client over the sandbox tunnel: it answers
pings, checks framing and closes cleanly, while this module only moves messages.
"""

from __future__ import annotations

import asyncio
import contextlib

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidState, ProtocolError
from websockets.frames import Close, Frame, Opcode
from websockets.http11 import Response
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from burrow.preview.asgi import Receive, Scope, Send

MAX_MESSAGE_BYTES = 16 << 20
READ_BYTES = 64 * 1024
UNSENDABLE_CLOSE_CODES = {1005, 1006, 1015}  # reserved: never put on the wire


class UpstreamRefused(Exception):
    """The service did not accept the WebSocket handshake."""


async def relay_websocket(
    scope: Scope,
    receive: Receive,
    send: Send,
    stream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    url: str,
    headers: list[tuple[bytes, bytes]],
) -> None:
    """Handshake upstream (`headers` include Host), accept the browser with the
    subprotocol the service chose, then relay both ways until either side closes. The
    caller has consumed `websocket.connect` and closes the stream afterwards."""
    reader, writer = stream
    subprotocols = [Subprotocol(p) for p in scope.get("subprotocols") or []]
    protocol = ClientProtocol(
        parse_uri(url), subprotocols=subprotocols or None, max_size=MAX_MESSAGE_BYTES
    )
    request = protocol.connect()
    # The forwarded headers carry the browser's Host; the one connect() made from the URL
    # would be a second (a request with two is invalid, RFC 9112 §3.2).
    del request.headers["Host"]
    for name, value in headers:
        request.headers[name.decode("latin-1")] = value.decode("latin-1")
    protocol.send_request(request)
    await _flush(protocol, writer)
    early = await _handshake(protocol, reader)
    await send({"type": "websocket.accept", "subprotocol": protocol.subprotocol})
    upstream = asyncio.ensure_future(_to_browser(protocol, reader, writer, send, early))
    browser = asyncio.ensure_future(_to_upstream(protocol, receive, writer))
    try:
        await asyncio.wait((upstream, browser), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (upstream, browser):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError, ProtocolError):
                await task


async def _handshake(protocol: ClientProtocol, reader: asyncio.StreamReader) -> list[Frame]:
    """Read until the service's handshake response; returns frames that came with it."""
    while True:
        data = await reader.read(READ_BYTES)
        if data:
            protocol.receive_data(data)
        else:
            protocol.receive_eof()
        events = protocol.events_received()
        for index, event in enumerate(events):
            if isinstance(event, Response):
                if protocol.handshake_exc is not None:
                    raise UpstreamRefused(str(protocol.handshake_exc))
                return [e for e in events[index + 1 :] if isinstance(e, Frame)]
        if not data:
            raise UpstreamRefused("the service closed the connection during the handshake")


async def _to_browser(
    protocol: ClientProtocol,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    send: Send,
    early: list[Frame],
) -> None:
    parts: list[bytes] = []
    opcode = Opcode.BINARY
    frames = early
    while True:
        for frame in frames:
            if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
                opcode, parts = frame.opcode, [bytes(frame.data)]
            elif frame.opcode == Opcode.CONT:
                parts.append(bytes(frame.data))
            elif frame.opcode == Opcode.CLOSE:
                await _flush(protocol, writer)  # the close reply
                code = Close.parse(frame.data).code if frame.data else 1000
                await send({"type": "websocket.close", "code": _sendable(code)})
                return
            else:
                continue  # ping and pong: the protocol answers pings itself
            if frame.fin:
                message = b"".join(parts)
                if opcode == Opcode.TEXT:
                    await send({"type": "websocket.send", "text": message.decode()})
                else:
                    await send({"type": "websocket.send", "bytes": message})
                parts = []
        await _flush(protocol, writer)
        data = await reader.read(READ_BYTES)
        if not data:
            protocol.receive_eof()
            await send({"type": "websocket.close", "code": 1011})
            return
        protocol.receive_data(data)
        frames = [e for e in protocol.events_received() if isinstance(e, Frame)]


async def _to_upstream(
    protocol: ClientProtocol, receive: Receive, writer: asyncio.StreamWriter
) -> None:
    while True:
        message = await receive()
        if message["type"] == "websocket.receive":
            if message.get("text") is not None:
                protocol.send_text(message["text"].encode())
            else:
                protocol.send_binary(message.get("bytes") or b"")
            await _flush(protocol, writer)
        elif message["type"] == "websocket.disconnect":
            code = int(message.get("code") or 1000)
            with contextlib.suppress(InvalidState, ProtocolError):
                if code in UNSENDABLE_CLOSE_CODES:
                    protocol.send_close()
                else:
                    protocol.send_close(code)
            await _flush(protocol, writer)
            return


async def _flush(protocol: ClientProtocol, writer: asyncio.StreamWriter) -> None:
    data = protocol.data_to_send()
    if data:
        writer.write(b"".join(data))
        await writer.drain()


def _sendable(code: int) -> int:
    return 1000 if code in UNSENDABLE_CLOSE_CODES else code
