"""`burrow serve` stops gracefully on SIGTERM or Ctrl+C even with clients attached: it ends
its event streams and terminal sockets, stops its sandboxes and exits 0 within seconds."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.api.harness import ADMIN_PASSWORD, serve_process

STOPPED_WITHIN = 5.0  # seconds; before the fix it waited for as long as a client stayed


def open_event_stream(base: str, cid: str, cookie: str) -> socket.socket:
    """A raw SSE client holding its stream (its first frame read)."""
    host, port = base.removeprefix("http://").split(":")
    stream = socket.create_connection((host, int(port)), timeout=10)
    stream.sendall(
        f"GET /api/conversations/{cid}/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Cookie: burrow_session={cookie}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    seen = b""
    while b": connected" not in seen:
        chunk = stream.recv(4096)
        assert chunk, seen
        seen += chunk
    assert seen.startswith(b"HTTP/1.1 200"), seen
    return stream


def read_until(ws: ClientConnection, marker: bytes) -> None:
    seen = b""
    while marker not in seen:
        message = ws.recv(timeout=10)
        assert isinstance(message, bytes)
        seen += message


def sandbox_leftovers(data_dir: Path) -> list[str]:
    """Processes whose command line names the data directory, and mounts under it."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(data_dir) in cmdline:
                found.append(f"process {proc.name}: {cmdline[:200]}")
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    found += [f"mount: {line}" for line in mounts if str(data_dir) in line]
    return found


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl+C"])
def test_a_stop_signal_with_a_stream_and_a_terminal_open_exits_0_within_5_s(
    tmp_path: Path, stop: signal.Signals
) -> None:
    data_dir = tmp_path / "data"
    with serve_process(data_dir, "demo") as (process, base), httpx.Client(base_url=base) as api:
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        assert api.post("/api/auth/login", json=login).status_code == 200
        cookie = api.cookies["burrow_session"]
        cid = api.post("/api/conversations", json={}).json()["id"]
        made = api.post(f"/api/conversations/{cid}/terminals", json={})
        assert made.status_code == 201, made.text
        tid = made.json()["terminal_id"]
        url = f"{base.replace('http', 'ws', 1)}/api/conversations/{cid}/terminals/{tid}/ws"
        stream = open_event_stream(base, cid, cookie)
        with connect(url, additional_headers={"Cookie": f"burrow_session={cookie}"}) as ws:
            ws.send(b"echo HELD-$((6*7))\n")
            read_until(ws, b"HELD-42")  # a live shell in a live sandbox
            assert sandbox_leftovers(data_dir)  # which the check below would see

            started = time.monotonic()
            process.send_signal(stop)
            code = process.wait(timeout=30)
            took = time.monotonic() - started
            print(f"{stop.name} -> exit {code} in {took:.2f} s")
            assert code == 0, code
            assert took < STOPPED_WITHIN, f"stopped after {took:.1f} s"
            # Both clients were told: the stream ended, the socket closed.
            stream.settimeout(5)
            while stream.recv(4096):
                pass
            with pytest.raises(ConnectionClosed) as closed:
                while True:  # the shell's last output (its prompt) may come first
                    ws.recv(timeout=5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        stream.close()
        assert sandbox_leftovers(data_dir) == []
