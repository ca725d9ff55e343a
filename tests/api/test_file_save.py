"""Saving a file from the Files editor (PUT …/files/content): the tools' path rules, a size
limit, If-Match against a lost update, the file.saved event the model and Changes see."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.api.harness import RunningServer
from tests.api.test_archives import sh
from tests.api.test_uploads import serve
from tests.fakes import text_reply

CONTENT = "/api/conversations/{cid}/files/content"


async def save(
    srv: RunningServer,
    cid: str,
    path: str,
    body: bytes,
    headers: dict[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
) -> httpx.Response:
    return await (client or srv.client).put(
        CONTENT.format(cid=cid),
        params={"path": path},
        content=body,
        headers={"Origin": srv.base_url, "Content-Type": "text/plain", **(headers or {})},
    )


async def test_a_saved_file_is_written_journaled_and_told_to_the_model(tmp_path: Path) -> None:
    async with serve(tmp_path) as (srv, fake):
        cid = await srv.create_conversation()
        fake.enqueue(text_reply("first"))
        run = await srv.send(cid, "hello")
        await srv.run_finished(cid, run["run_id"])  # its start took the first checkpoint
        saved = await save(srv, cid, "src/app.py", b"print('edited')\n")
        assert saved.status_code == 200, saved.text
        body = saved.json()
        assert body["path"] == "src/app.py" and body["size"] == 16
        read = await srv.client.get(CONTENT.format(cid=cid), params={"path": "src/app.py"})
        assert read.content == b"print('edited')\n" and read.headers["etag"] == body["etag"]
        [event] = [e for e in await srv.events(cid) if e["type"] == "file.saved"]
        assert event["data"] == {"path": "src/app.py", "bytes": 16} and event["run_id"] is None
        diff = await srv.client.get(f"/api/conversations/{cid}/diff")
        assert [(f["path"], f["status"]) for f in diff.json()["files"]] == [("src/app.py", "added")]
        fake.enqueue(text_reply("noted"))
        run = await srv.send(cid, "go on")
        await srv.run_finished(cid, run["run_id"])
        told = [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "user"]
        assert any("saved src/app.py in the file editor" in str(c) for c in told), told


async def test_if_match_keeps_a_changed_file(tmp_path: Path) -> None:
    async with serve(tmp_path) as (srv, _):
        cid = await srv.create_conversation()
        first = await save(srv, cid, "notes.md", b"v1")
        etag = first.json()["etag"]
        assert (await save(srv, cid, "notes.md", b"v2", {"If-Match": etag})).status_code == 200
        stale = await save(srv, cid, "notes.md", b"v3", {"If-Match": etag})
        assert stale.status_code == 412 and stale.json()["error"]["code"] == "file_changed"
        read = await srv.client.get(CONTENT.format(cid=cid), params={"path": "notes.md"})
        assert read.content == b"v2"
        assert (await save(srv, cid, "notes.md", b"v3")).status_code == 200  # overwrite


async def test_a_save_cannot_leave_the_workspace_or_touch_burrows_own(tmp_path: Path) -> None:
    async with serve(tmp_path, file_save_max_mb=0.01) as (srv, _):
        cid = await srv.create_conversation()
        await sh(srv, cid, "mkdir -p /tmp/outside && ln -s /tmp/outside out && "
                 "ln -s /etc/passwd pw && ln -s .. up")  # fmt: skip
        before = await sh(srv, cid, "find . /tmp/outside | sort; md5sum /etc/passwd")
        refused = {
            "../x": (400, "invalid_path"),
            "/etc/passwd": (400, "invalid_path"),
            "/workspace/../etc/x": (400, "invalid_path"),
            "out/x": (400, "path_escape"),
            "pw": (400, "path_escape"),
            "up/x": (400, "path_escape"),
            ".burrow/checkpoints/HEAD": (400, "invalid_path"),
            ".burrow/outputs/a.log": (400, "invalid_path"),
            "a\0b": (400, "invalid_path"),
            ".": (400, "invalid_path"),
        }
        for path, (status, code) in refused.items():
            response = await save(srv, cid, path, b"evil")
            assert (response.status_code, response.json()["error"]["code"]) == (status, code), path
        big = await save(srv, cid, "big.txt", b"x" * 20_000)
        assert big.status_code == 413 and big.json()["error"]["code"] == "file_too_large"
        assert await sh(srv, cid, "find . /tmp/outside | sort; md5sum /etc/passwd") == before
        assert not [e for e in await srv.events(cid) if e["type"] == "file.saved"]


async def test_a_save_needs_the_owner_and_our_origin(tmp_path: Path) -> None:
    async with serve(tmp_path) as (srv, _):
        cid = await srv.create_conversation()
        foreign = await save(srv, cid, "x.txt", b"x", {"Origin": "http://evil.example"})
        assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "cross_origin"
        made = await srv.client.post(
            "/api/users", json={"username": "bob", "password": "bob-pw-123"}
        )
        assert made.status_code == 201
        async with httpx.AsyncClient(base_url=srv.base_url) as bob:
            await bob.post("/api/auth/login", json={"username": "bob", "password": "bob-pw-123"})
            theirs = await save(srv, cid, "x.txt", b"x", client=bob)
            assert theirs.status_code == 404
        listing = await srv.client.get(f"/api/conversations/{cid}/files")
        assert "x.txt" not in [e["name"] for e in listing.json()]
