"""The workspace as a download (zip, tar.gz): what it holds is the workspace minus Burrow's
internals, read back by opening the archive; streamed; a hibernated sandbox is woken."""

from __future__ import annotations

import asyncio
import io
import tarfile
import zipfile
from pathlib import Path

from burrow.sandbox.backend import Sandbox
from tests.api.harness import RunningServer, running_server
from tests.api.test_archives import sh

WORKSPACE = r"""
mkdir -p src/deep .burrow/outputs .burrow/services .burrow/checkpoints .burrow/attachments \
  .burrow/skills/s .git
printf 'print(1)\n' > src/main.py
printf 'deep' > src/deep/a.txt
head -c 300000 /dev/urandom > src/blob.bin
printf 'log' > .burrow/outputs/call.log
printf 'svc' > .burrow/services/web.log
printf '{}' > .burrow/services.json
printf 'ck' > .burrow/checkpoints/HEAD
printf 'pic' > .burrow/attachments/a.png
printf '# skill' > .burrow/skills/s/SKILL.md
printf 'ref: refs/heads/main' > .git/HEAD
ln -s src/main.py link-to-main
ln -s /etc/passwd link-out
mkfifo a-fifo
mkdir empty
"""
EXPECTED = {
    ".burrow/": None,
    ".burrow/attachments/": None,
    ".burrow/attachments/a.png": b"pic",
    ".burrow/skills/": None,
    ".burrow/skills/s/": None,
    ".burrow/skills/s/SKILL.md": b"# skill",
    ".git/": None,
    ".git/HEAD": b"ref: refs/heads/main",
    "empty/": None,
    "link-out": "/etc/passwd",
    "link-to-main": "src/main.py",
    "src/": None,
    "src/deep/": None,
    "src/deep/a.txt": b"deep",
    "src/main.py": b"print(1)\n",
}


async def download(srv: RunningServer, cid: str, fmt: str) -> tuple[bytes, dict[str, str]]:
    response = await srv.client.get(
        f"/api/conversations/{cid}/workspace/archive", params={"format": fmt}
    )
    assert response.status_code == 200, response.text
    return response.content, dict(response.headers)


def zip_contents(data: bytes) -> dict[str, bytes | str | None]:
    found: dict[str, bytes | str | None] = {}
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            mode = info.external_attr >> 16
            if info.is_dir():
                found[info.filename] = None
            elif mode >> 12 == 0o12:
                found[info.filename] = zf.read(info).decode()
            else:
                found[info.filename] = zf.read(info)
    return found


def tar_contents(data: bytes) -> dict[str, bytes | str | None]:
    found: dict[str, bytes | str | None] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
        for member in tf:
            if member.isdir():
                found[member.name + "/"] = None
            elif member.issym():
                found[member.name] = member.linkname
            else:
                extracted = tf.extractfile(member)
                assert extracted is not None, member.name
                found[member.name] = extracted.read()
    return found


async def test_the_archive_holds_the_workspace_minus_burrows_internals(tmp_path: Path) -> None:
    async with running_server(tmp_path, None, model="demo") as srv:
        cid = await srv.create_conversation(title='My "App" / ünï')
        await sh(srv, cid, WORKSPACE)
        blob = (
            await srv.client.get(
                f"/api/conversations/{cid}/files/content", params={"path": "src/blob.bin"}
            )
        ).content
        expected = {**EXPECTED, "src/blob.bin": blob}
        data, headers = await download(srv, cid, "zip")
        assert headers["content-type"] == "application/zip"
        assert headers["content-disposition"] == (
            'attachment; filename="My-App-n.zip"; '
            "filename*=UTF-8''My%20-App-%20-%20%C3%BCn%C3%AF.zip"
        )
        assert zip_contents(data) == expected
        # A hibernated sandbox is woken for it.
        assert await srv.services.runtime.sandboxes.hibernate(cid)
        data, headers = await download(srv, cid, "tar.gz")
        assert headers["content-type"] == "application/gzip"
        assert tar_contents(data) == expected


async def test_a_big_workspace_streams_in_pieces(tmp_path: Path) -> None:
    async with running_server(tmp_path, None, model="demo") as srv:
        cid = await srv.create_conversation()
        await sh(srv, cid, "head -c 30000000 /dev/urandom > big.bin")
        pieces = 0
        size = 0
        async with srv.client.stream(
            "GET", f"/api/conversations/{cid}/workspace/archive", params={"format": "tar.gz"}
        ) as response:
            assert response.status_code == 200
            assert "content-length" not in response.headers  # streamed, not buffered
            async for chunk in response.aiter_raw():
                pieces += 1
                size += len(chunk)
        assert size > 30_000_000 and pieces > 10


async def test_an_abandoned_download_stops_the_packer(tmp_path: Path) -> None:
    async with running_server(tmp_path, None, model="demo") as srv:
        cid = await srv.create_conversation()
        await sh(srv, cid, "head -c 50000000 /dev/urandom > big.bin")
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        async with srv.client.stream(
            "GET", f"/api/conversations/{cid}/workspace/archive", params={"format": "zip"}
        ) as response:
            async for _ in response.aiter_raw():
                break  # the person cancelled the download
        assert await sandbox.running_commands() == 0 or await _eventually_idle(sandbox)


async def _eventually_idle(sandbox: Sandbox) -> bool:
    for _ in range(100):
        if await sandbox.running_commands() == 0:
            return True
        await asyncio.sleep(0.1)
    return False
