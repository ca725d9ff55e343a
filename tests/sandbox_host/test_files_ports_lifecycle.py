"""Filesystem RPCs, the port proxy, pause/resume and timeouts through the stock e2b SDK."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from e2b import AsyncSandbox, FileType, SandboxException
from e2b.exceptions import NotFoundException
from e2b.sandbox.filesystem.watch_handle import FilesystemEvent, FilesystemEventType

from tests.sandbox_host.harness import DOMAIN, Host

pytestmark = pytest.mark.timeout(90)


async def test_filesystem_rpcs(sandbox: AsyncSandbox) -> None:
    assert await sandbox.files.make_dir("/home/user/src/pkg")
    assert not await sandbox.files.make_dir("src/pkg")  # exists: False, as envd answers
    await sandbox.files.write("src/pkg/a.py", "print(1)\n")
    assert await sandbox.files.exists("src/pkg/a.py")
    assert not await sandbox.files.exists("src/pkg/missing.py")
    info = await sandbox.files.get_info("src/pkg/a.py")
    assert (info.name, info.type, info.size, info.path) == (
        "a.py",
        FileType.FILE,
        9,
        "/home/user/src/pkg/a.py",
    )
    top = await sandbox.files.list("src")
    assert [(e.name, e.type) for e in top] == [("pkg", FileType.DIR)]
    deep = await sandbox.files.list("src", depth=2)
    assert sorted(e.path for e in deep) == ["/home/user/src/pkg", "/home/user/src/pkg/a.py"]

    moved = await sandbox.files.rename("src/pkg/a.py", "/home/user/src/b.py")
    assert moved.path == "/home/user/src/b.py"
    assert await sandbox.files.read("src/b.py") == "print(1)\n"
    await sandbox.files.remove("src")
    assert not await sandbox.files.exists("src")
    await sandbox.files.remove("src")  # gone already: removed, as envd has it
    with pytest.raises(NotFoundException):
        await sandbox.files.get_info("src")


async def test_entries_carry_their_mode_owner_and_link_target(sandbox: AsyncSandbox) -> None:
    await sandbox.files.write("d/a.txt", "a")
    await sandbox.commands.run("chmod 640 d/a.txt && ln -s a.txt d/link && ln -s .. d/up")
    info = await sandbox.files.get_info("d/a.txt")
    assert (info.mode, info.permissions) == (0o640, "-rw-r-----")
    assert info.owner and info.group  # the sandbox's own names (root inside it)
    folder = await sandbox.files.get_info("d")
    assert (folder.type, folder.mode, folder.permissions) == (FileType.DIR, 0o755, "drwxr-xr-x")
    link = await sandbox.files.get_info("d/link")
    # The target's type with `is_symlink`, as newer envd says it (this SDK: SYMLINK; an
    # older one, which reads only the type: FILE).
    assert (link.name, link.path, link.type) == ("link", "/home/user/d/link", FileType.SYMLINK)
    assert link.symlink_target == "/home/user/d/a.txt"
    assert (await sandbox.files.get_info("d/up")).symlink_target == "/home/user"
    # A link to the sandbox's own system is followed, as envd does; one into the kernel's
    # views is not.
    await sandbox.commands.run("ln -s /etc/os-release d/system && ln -s /proc/1/environ d/out")
    assert (await sandbox.files.get_info("d/system")).symlink_target == "/etc/os-release"
    with pytest.raises(SandboxException):
        await sandbox.files.get_info("d/out")


async def test_watching_a_directory(sandbox: AsyncSandbox) -> None:
    await sandbox.files.make_dir("watched")
    created = asyncio.Event()

    def on_event(event: FilesystemEvent) -> None:
        if (event.name, event.type) == ("new.txt", FilesystemEventType.CREATE):
            created.set()

    handle = await sandbox.files.watch_dir("watched", on_event=on_event)
    await sandbox.files.write("watched/new.txt", "x")
    await asyncio.wait_for(created.wait(), 5)
    await handle.stop()


async def test_a_port_is_proxied_by_header_and_by_host(sdk: Host, sandbox: AsyncSandbox) -> None:
    await sandbox.files.write("site/index.html", "<h1>from the sandbox</h1>")
    await sandbox.commands.run(
        "cd site && exec python3 -m http.server 8000 --bind 127.0.0.1", background=True
    )
    token = sandbox._envd_access_token  # what the SDK sends as X-Access-Token
    assert token
    by_header = {"E2b-Sandbox-Id": sandbox.sandbox_id, "E2b-Sandbox-Port": "8000"}
    async with httpx.AsyncClient(base_url=sdk.url, timeout=10) as client:
        for _ in range(100):  # until the server listens
            answer = await client.get("/index.html", headers={**by_header, "X-Access-Token": token})
            if answer.status_code != 502:
                break
            await asyncio.sleep(0.1)
        assert answer.status_code == 200
        assert answer.text == "<h1>from the sandbox</h1>"

        host = {"Host": f"8000-{sandbox.sandbox_id}.{DOMAIN}", "X-Access-Token": token}
        assert (await client.get("/index.html", headers=host)).text.startswith("<h1>")

        refused = await client.get(
            "/", headers={**by_header, "E2b-Sandbox-Port": "8001", "X-Access-Token": token}
        )
        assert refused.status_code == 502
        assert "port is not open" in refused.json()["message"]
        anonymous = await client.get("/index.html", headers=by_header)
        assert anonymous.status_code == 401

        # The traffic token (the SDK's `traffic_access_token`) opens ports, not envd.
        traffic = {"e2b-traffic-access-token": sandbox.traffic_access_token or ""}
        assert (
            await client.get("/index.html", headers={**by_header, **traffic})
        ).status_code == 200
        envd_port = {**by_header, "E2b-Sandbox-Port": "49983", **traffic}
        assert (
            await client.get("/files", params={"path": "site/index.html"}, headers=envd_port)
        ).status_code == 401


async def test_pause_keeps_files_and_connect_resumes(sdk: Host) -> None:
    sandbox = await AsyncSandbox.create()
    try:
        await sandbox.files.write("kept.txt", "still here")
        await sandbox.pause()
        assert (await sandbox.get_info()).state.value == "paused"
        with pytest.raises(SandboxException):
            await sandbox.commands.run("true")
        resumed = await AsyncSandbox.connect(sandbox.sandbox_id)
        assert (await resumed.get_info()).state.value == "running"
        assert (await resumed.commands.run("cat kept.txt")).stdout == "still here"
    finally:
        await sandbox.kill()


async def test_the_timeout_kills_and_set_timeout_extends(sdk: Host) -> None:
    short = await AsyncSandbox.create(timeout=1)
    extended = await AsyncSandbox.create(timeout=1)
    pausing = await AsyncSandbox.create(timeout=1, lifecycle={"on_timeout": "pause"})
    await extended.set_timeout(60)
    await asyncio.sleep(3)
    assert not await short.is_running()
    assert await extended.is_running()
    assert (await pausing.get_info()).state.value == "paused"
    await pausing.kill()
    with pytest.raises(NotFoundException):
        await AsyncSandbox.get_info(short.sandbox_id)
    await extended.kill()


# A WebSocket echo server on the sandbox's system Python (stdlib only): one text message.
ECHO_SERVER = r"""
import base64, hashlib, socket
listener = socket.create_server(("127.0.0.1", 8002))
while True:
    conn, _ = listener.accept()
    head = b""
    while b"\r\n\r\n" not in head:
        head += conn.recv(4096)
    lines = head.split(b"\r\n")
    key = [l.split(b":", 1)[1].strip() for l in lines if l.lower().startswith(b"sec-websocket-key")]
    magic = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    accept = base64.b64encode(hashlib.sha1(key[0] + magic).digest())
    conn.sendall(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
    )
    frame = conn.recv(4096)
    length, mask = frame[1] & 0x7F, frame[2:6]
    text = bytes(b ^ mask[i % 4] for i, b in enumerate(frame[6:6 + length]))
    reply = b"echo: " + text
    conn.sendall(bytes([0x81, len(reply)]) + reply)
"""


async def test_a_websocket_is_relayed_to_the_sandbox(sdk: Host, sandbox: AsyncSandbox) -> None:
    from websockets.asyncio.client import connect

    await sandbox.files.write("echo_server.py", ECHO_SERVER)
    await sandbox.commands.run("exec python3 echo_server.py", background=True)
    headers = {
        "E2b-Sandbox-Id": sandbox.sandbox_id,
        "E2b-Sandbox-Port": "8002",
        "X-Access-Token": sandbox._envd_access_token or "",
    }
    url = sdk.url.replace("http://", "ws://") + "/socket"
    for _ in range(100):
        try:
            async with connect(url, additional_headers=headers, open_timeout=5) as socket:
                await socket.send("hello")
                assert await asyncio.wait_for(socket.recv(), 5) == "echo: hello"
                return
        except OSError:
            await asyncio.sleep(0.1)
        except Exception as exc:  # the handshake is refused until the server listens
            if "1011" not in str(exc) and "HTTP 4" not in str(exc) and "rejected" not in str(exc):
                raise
            await asyncio.sleep(0.1)
    pytest.fail("the WebSocket was never relayed")


async def test_signed_file_urls_open_one_path_one_way(sdk: Host, sandbox: AsyncSandbox) -> None:
    """E2B's `download_url` / `upload_url`: the signature, not the token, opens the file,
    on the host's own address (no sandbox named: its signer is found)."""
    await sandbox.files.write("shared/report.txt", "the report")
    read = sandbox.download_url("shared/report.txt", "user")
    assert "signature=v1_" in read and sandbox._envd_access_token not in read
    async with httpx.AsyncClient(timeout=10) as client:
        answer = await client.get(read)
        assert (answer.status_code, answer.text) == (200, "the report")
        # Another path, a changed signature, the other way, after it expired: refused.
        assert (await client.get(read.replace("report.txt", "other.txt"))).status_code == 401
        assert (
            await client.get(read.replace("signature=v1_", "signature=v1_x"))
        ).status_code == 401
        assert (await client.post(read, files={"file": b"x"})).status_code == 401
        expired = sandbox.download_url("shared/report.txt", "user", use_signature_expiration=-60)
        refused = await client.get(expired)
        assert refused.status_code == 401
        assert refused.json() == {"code": 401, "message": "signature is already expired"}
        # An expiration changed to a later one no longer matches its signature.
        later = expired.replace(
            expired.split("signature_expiration=")[1], str(int(time.time()) + 600)
        )
        assert (await client.get(later)).status_code == 401
        write = sandbox.upload_url("shared/upload.txt", "user")
        stored = await client.post(write, files={"file": ("upload.txt", b"uploaded")})
        assert stored.status_code == 200, stored.text
    assert await sandbox.files.read("shared/upload.txt") == "uploaded"
