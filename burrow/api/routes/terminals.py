"""Interactive terminals in the conversation's sandbox (DESIGN.md §3).

The WebSocket carries PTY bytes as binary frames both ways and resizes as text frames
(`{"type": "resize", "cols": C, "rows": R}`). A socket first gets the scrollback; several
sockets may watch one terminal; closing a socket leaves the shell running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Annotated, TypeGuard
from urllib.parse import urlsplit

from fastapi import APIRouter, Path, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, Field

from burrow.api.deps import (
    ConversationDep,
    ServicesDep,
    credential_digest,
    optional_user,
    stream_cap,
)
from burrow.api.errors import not_found
from burrow.api.session_cookie import DuplicateSessionCookie
from burrow.api.streams import CLOSE_TOO_MANY_STREAMS, Ending, TooManyStreams
from burrow.sandbox.terminals import Attachment, Terminal

router = APIRouter(prefix="/api/conversations", tags=["terminals"])

TerminalId = Annotated[str, Path(max_length=64)]

# WebSocket close codes (4000-4999 are the application's)
CLOSE_UNAUTHORIZED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_FORBIDDEN_ORIGIN = 4403
CLOSE_ENDED = 4000  # the shell exited or the sandbox stopped
CLOSE_LAGGING = 4008  # this socket fell too far behind; reconnect to get the scrollback
# and CLOSE_TOO_MANY_STREAMS = 4429: the user's open streams are at the cap (api/streams.py)


class TerminalIn(BaseModel):
    cols: int = Field(80, ge=1, le=1000)
    rows: int = Field(24, ge=1, le=1000)


class TerminalOut(BaseModel):
    terminal_id: str
    cols: int
    rows: int
    exited: bool
    exit_code: int | None


def _out(terminal: Terminal) -> TerminalOut:
    return TerminalOut(
        terminal_id=terminal.id,
        cols=terminal.cols,
        rows=terminal.rows,
        exited=terminal.exited,
        exit_code=terminal.exit_code,
    )


@router.post("/{cid}/terminals", status_code=201)
async def open_terminal(
    body: TerminalIn, conversation: ConversationDep, svc: ServicesDep
) -> TerminalOut:
    """A login shell in the workspace (wakes a hibernated sandbox)."""
    workspace = svc.conversations.workspace
    return _out(await workspace.open_terminal(conversation.id, body.cols, body.rows))


@router.get("/{cid}/terminals")
async def list_terminals(conversation: ConversationDep, svc: ServicesDep) -> list[TerminalOut]:
    return [_out(t) for t in svc.conversations.workspace.terminals(conversation.id)]


@router.delete("/{cid}/terminals/{tid}", status_code=204)
async def close_terminal(tid: TerminalId, conversation: ConversationDep, svc: ServicesDep) -> None:
    if not await svc.conversations.workspace.close_terminal(conversation.id, tid):
        raise not_found(f"Terminal {tid}")


@router.websocket("/{cid}/terminals/{tid}/ws")
async def terminal_socket(websocket: WebSocket, cid: str, tid: str) -> None:
    svc = websocket.app.state.services
    # Cookies ride along on cross-site WebSocket handshakes: a preview page must not get in.
    origin = websocket.headers.get("origin")
    # The Host as a trusted proxy forwarded it (burrow.api.forwarded), or as sent.
    if origin is not None and urlsplit(origin).netloc != websocket.headers.get("host", ""):
        await websocket.close(CLOSE_FORBIDDEN_ORIGIN, "cross-origin terminal refused")
        return
    try:
        user = await optional_user(websocket, svc)
    except DuplicateSessionCookie:
        await websocket.close(CLOSE_UNAUTHORIZED, "two session cookies: clear this site's cookies")
        return
    if user is None:
        await websocket.close(CLOSE_UNAUTHORIZED, "log in first")
        return
    owned = await svc.conversations.get(cid, owner_id=user.id)
    terminal = svc.conversations.workspace.terminal(cid, tid) if owned is not None else None
    if terminal is None:
        await websocket.close(CLOSE_NOT_FOUND, "no such terminal")
        return
    await websocket.accept()  # before the cap check: a close code reaches only an open socket
    try:
        slot = stream_cap(websocket).acquire(user.id, "terminal", credential_digest(websocket))
    except TooManyStreams as exc:
        await websocket.close(CLOSE_TOO_MANY_STREAMS, exc.close_reason)
        return
    scrollback, attachment = terminal.attach()
    # Logout, a password change, a disabled account or the server's shutdown (api/streams.py).
    ended: asyncio.Future[Ending] = asyncio.get_running_loop().create_future()
    slot.on_end(ended.set_result)  # called once: a slot ends once
    try:
        sending = asyncio.create_task(_send_output(websocket, scrollback, attachment))
        receiving = asyncio.create_task(_receive_input(websocket, terminal))
        # A client too slow for the output is dropped even while a send to it is stuck.
        dropped = asyncio.create_task(attachment.dropped.wait())
        done, pending = await asyncio.wait(
            {sending, receiving, dropped, ended}, return_when="FIRST_COMPLETED"
        )
        for task in pending - {ended}:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if ended in done:
            with contextlib.suppress(Exception):
                await websocket.close(ended.result().code, ended.result().reason)
        elif dropped in done or (sending in done and not sending.exception()):
            lagging = attachment.dropped.is_set()
            code = CLOSE_LAGGING if lagging else CLOSE_ENDED
            with contextlib.suppress(Exception):
                await websocket.close(code, "too slow" if lagging else "terminal ended")
    finally:
        terminal.detach(attachment)
        slot.release()


async def _send_output(websocket: WebSocket, scrollback: bytes, attachment: Attachment) -> None:
    if scrollback:
        await websocket.send_bytes(scrollback)
    while (data := await attachment.get()) is not None:
        await websocket.send_bytes(data)


async def _receive_input(websocket: WebSocket, terminal: Terminal) -> None:
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("bytes"):
                await terminal.write(message["bytes"])
            elif message.get("text"):
                await _control(terminal, message["text"])


async def _control(terminal: Terminal, text: str) -> None:
    try:
        command = json.loads(text)
    except ValueError:
        return
    if not isinstance(command, dict) or command.get("type") != "resize":
        return
    cols, rows = command.get("cols"), command.get("rows")
    if _dimension(cols) and _dimension(rows):
        await terminal.resize(cols, rows)


def _dimension(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1000
