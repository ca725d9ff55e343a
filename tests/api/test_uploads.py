"""Uploads into the workspace, thumbnails, and attachments on their way to the model:
a real server, real sandboxes, the fake OpenAI and Anthropic servers."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from tests.api.harness import RunningServer, log_in, running_server
from tests.fakes import FakeOpenAIServer, text_reply
from tests.fakes.anthropic_server import FakeAnthropicServer, message, text

KEY = "sk-fake-0123456789"
# A real 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()


@contextlib.asynccontextmanager
async def serve(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[RunningServer, Any]]:
    with FakeOpenAIServer() as fake:
        async with running_server(tmp_path, None, **settings) as srv:
            response = await srv.client.put(
                "/api/settings/model",
                json={"model": "fake-model", "base_url": fake.base_url, "api_key": KEY},
            )
            assert response.status_code == 200, response.text
            yield srv, fake


def own(srv: RunningServer) -> dict[str, str]:
    return {"Origin": srv.base_url}


async def upload(
    srv: RunningServer,
    cid: str,
    content: bytes,
    name: str = "pic.png",
    headers: dict[str, str] | None = None,
    **fields: str,
) -> httpx.Response:
    return await srv.client.post(
        f"/api/conversations/{cid}/uploads",
        files={"file": (name, content, "image/png")},
        data=fields,
        headers=own(srv) if headers is None else headers,
    )


async def test_an_attached_png_reaches_a_vision_model_as_an_image_block_journaled_as_a_path(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path) as (srv, fake):
        made = await srv.client.post("/api/conversations", json={"model": "gpt-4o"})
        cid = made.json()["id"]
        response = await upload(srv, cid, PNG, "my pic.png")
        assert response.status_code == 201, response.text
        [path] = response.json()["files"]
        assert path.startswith(".burrow/attachments/") and path.endswith("-my_pic.png")
        fake.enqueue(text_reply("a red dot"))
        run = await srv.client.post(
            f"/api/conversations/{cid}/messages",
            json={"content": "what is this?", "attachments": [path]},
        )
        assert run.status_code == 202, run.text
        await srv.run_finished(cid, run.json()["run_id"])
        user = fake.requests[-1]["messages"][-1]
        assert user["role"] == "user"
        blocks = {block["type"]: block for block in user["content"]}
        assert blocks["image_url"]["image_url"]["url"] == f"data:image/png;base64,{PNG_B64}"
        assert "what is this?" in blocks["text"]["text"] and path in blocks["text"]["text"]
        events = await srv.events(cid)
        [sent] = [e for e in events if e["type"] == "user.message"]
        assert sent["data"]["attachments"] == [path]
        assert PNG_B64[:40] not in json.dumps(events)  # a reference, never the bytes
        # The thumbnail: an image, sandboxed, never sniffed.
        name = path.rsplit("/", 1)[1]
        thumb = await srv.client.get(f"/api/conversations/{cid}/attachments/{name}")
        assert thumb.status_code == 200 and thumb.content == PNG
        assert thumb.headers["content-type"] == "image/png"
        assert thumb.headers["x-content-type-options"] == "nosniff"
        assert thumb.headers["content-security-policy"].startswith("sandbox")


async def test_a_text_only_model_gets_a_note_naming_the_file(tmp_path: Path) -> None:
    async with serve(tmp_path) as (srv, fake):
        cid = await srv.create_conversation()  # fake-model: not known to see images
        [path] = (await upload(srv, cid, PNG)).json()["files"]
        fake.enqueue(text_reply("ok"))
        run = await srv.client.post(
            f"/api/conversations/{cid}/messages", json={"content": "look", "attachments": [path]}
        )
        await srv.run_finished(cid, run.json()["run_id"])
        content = fake.requests[-1]["messages"][-1]["content"]
        assert isinstance(content, str)
        assert "cannot see images" in content and path in content and PNG_B64 not in content


async def test_an_attached_png_reaches_anthropic_as_an_image_block(tmp_path: Path) -> None:
    with FakeAnthropicServer(api_key=KEY) as anthropic:
        async with serve(tmp_path) as (srv, _):
            await srv.client.put(
                "/api/settings/providers/anthropic",
                json={"api_key": KEY, "base_url": anthropic.base_url},
            )
            made = await srv.client.post(
                "/api/conversations", json={"model": "anthropic:claude-haiku-4-5"}
            )
            cid = made.json()["id"]
            [path] = (await upload(srv, cid, PNG)).json()["files"]
            anthropic.enqueue(message([text("a dot")]))
            run = await srv.client.post(
                f"/api/conversations/{cid}/messages",
                json={"content": "what is it?", "attachments": [path]},
            )
            finished = await srv.run_finished(cid, run.json()["run_id"])
            assert finished["data"]["status"] == "completed", finished["data"]
            user = anthropic.requests[-1]["messages"][-1]
            [image] = [b for b in user["content"] if b["type"] == "image"]
            assert image["source"] == {"type": "base64", "media_type": "image/png", "data": PNG_B64}


async def test_an_upload_goes_where_path_says_inside_the_workspace_only(tmp_path: Path) -> None:
    async with serve(tmp_path) as (srv, _):
        cid = await srv.create_conversation()
        ok = await upload(srv, cid, b"hello\n", "notes.txt", path="docs/notes.txt")
        assert ok.json() == {"files": ["docs/notes.txt"]}
        read = await srv.client.get(
            f"/api/conversations/{cid}/files/content", params={"path": "docs/notes.txt"}
        )
        assert read.text == "hello\n"
        inside = await upload(srv, cid, b"x", path="/workspace/a/b.txt")
        assert inside.json() == {"files": ["a/b.txt"]}
        for bad in ("../escape.txt", "a/../../escape.txt", "/etc/passwd", "/workspace2/x", "."):
            refused = await upload(srv, cid, b"x", path=bad)
            assert refused.status_code == 400, bad
            assert refused.json()["error"]["code"] == "invalid_path"
        # A file name with a path in it is reduced to its last part.
        sneaky = await upload(srv, cid, b"x", "../../../etc/cron.d/evil")
        [path] = sneaky.json()["files"]
        assert path.startswith(".burrow/attachments/") and path.endswith("-evil")
        assert not (tmp_path / "etc").exists()


async def test_a_message_cannot_attach_a_path_outside_the_workspace(tmp_path: Path) -> None:
    async with serve(tmp_path) as (srv, _):
        cid = await srv.create_conversation()
        for bad in ("../../secret.key", "/etc/shadow"):
            response = await srv.client.post(
                f"/api/conversations/{cid}/messages", json={"content": "x", "attachments": [bad]}
            )
            assert response.status_code == 400, bad
            assert response.json()["error"]["code"] == "invalid_path"
        assert await srv.events(cid) == []


async def test_uploads_come_from_the_app_or_a_bearer_token(tmp_path: Path) -> None:
    async with serve(tmp_path) as (srv, _):
        cid = await srv.create_conversation()
        foreign = await upload(srv, cid, PNG, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "cross_origin"
        preview = {"Origin": f"http://3000-{cid}.preview.localhost:8421"}
        assert (await upload(srv, cid, PNG, headers=preview)).status_code == 403
        cookie_only = await upload(srv, cid, PNG, headers={})
        assert cookie_only.status_code == 403
        assert cookie_only.json()["error"]["code"] == "origin_required"
        token = (await srv.client.post("/api/auth/tokens", json={"name": "cli"})).json()["token"]
        async with httpx.AsyncClient(base_url=srv.base_url) as cli:
            bearer = await cli.post(
                f"/api/conversations/{cid}/uploads",
                files={"file": ("a.png", PNG, "image/png")},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert bearer.status_code == 201, bearer.text
            # Multipart anywhere else is still refused: the JSON rule stands.
            form = await cli.post(
                f"/api/conversations/{cid}/messages",
                files={"content": ("c", b"hi")},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert form.status_code == 415


async def test_another_users_conversation_is_not_found(tmp_path: Path) -> None:
    async with serve(tmp_path) as (srv, _):
        cid = await srv.create_conversation()
        [path] = (await upload(srv, cid, PNG)).json()["files"]
        made = await srv.client.post(
            "/api/users", json={"username": "mallory", "password": "mallory-pw-1"}
        )
        assert made.status_code == 201, made.text
        async with httpx.AsyncClient(base_url=srv.base_url) as mallory:
            await log_in(mallory, "mallory", "mallory-pw-1")
            headers = {"Origin": srv.base_url}
            up = await mallory.post(
                f"/api/conversations/{cid}/uploads",
                files={"file": ("a.png", PNG, "image/png")},
                headers=headers,
            )
            assert up.status_code == 404
            name = path.rsplit("/", 1)[1]
            thumb = await mallory.get(f"/api/conversations/{cid}/attachments/{name}")
            assert thumb.status_code == 404


async def _send_part_of_a_huge_upload(srv: RunningServer, cid: str, size: int) -> bytes:
    """Start a chunked upload far larger than allowed, send `size` bytes of it, and read
    what the server says without sending the rest (a buffering server would say nothing)."""
    host, port = srv.base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    cookie = srv.client.cookies.get("burrow_session")
    writer.write(
        (
            f"POST /api/conversations/{cid}/uploads HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Origin: {srv.base_url}\r\nCookie: burrow_session={cookie}\r\n"
            "Content-Type: multipart/form-data; boundary=b0undary\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode()
    )
    head = (
        b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n"
    )
    writer.write(b"%x\r\n%s\r\n" % (len(head), head))
    chunk = b"\0" * 65536
    for _ in range(size // len(chunk)):
        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()
    try:
        async with asyncio.timeout(10):
            return await reader.readuntil(b"\r\n\r\n")
    finally:
        writer.close()


async def test_a_huge_upload_is_refused_while_it_streams(tmp_path: Path) -> None:
    async with serve(tmp_path, upload_max_mb=1.0) as (srv, _):
        cid = await srv.create_conversation()
        declared = await upload(srv, cid, b"\0" * (2 * 2**20), "big.bin")
        assert declared.status_code == 413
        assert "BURROW_UPLOAD_MAX_MB" in declared.json()["error"]["message"]
        # Chunked, no Content-Length: counted as it arrives, refused before it ends.
        answer = await _send_part_of_a_huge_upload(srv, cid, 2 * 2**20)
        assert answer.startswith(b"HTTP/1.1 413"), answer
        just_fits = await upload(srv, cid, b"\0" * (2**20 - 1), "fits.bin")
        assert just_fits.status_code == 201
        listing = await srv.client.get(
            f"/api/conversations/{cid}/files", params={"path": ".burrow/attachments"}
        )
        assert [e["name"].split("-", 1)[1] for e in listing.json()] == ["fits.bin"]


async def test_a_file_claiming_to_be_an_image_is_not_served_as_one(tmp_path: Path) -> None:
    async with serve(tmp_path) as (srv, fake):
        made = await srv.client.post("/api/conversations", json={"model": "gpt-4o"})
        cid = made.json()["id"]
        html = b"<html><script>alert(document.cookie)</script></html>"
        [path] = (await upload(srv, cid, html, "cat.png")).json()["files"]
        name = path.rsplit("/", 1)[1]
        thumb = await srv.client.get(f"/api/conversations/{cid}/attachments/{name}")
        assert thumb.status_code == 415 and thumb.json()["error"]["code"] == "not_an_image"
        for bad in ("%2E%2E", "..%2F..%2Fetc%2Fpasswd"):
            assert (
                await srv.client.get(f"/api/conversations/{cid}/attachments/{bad}")
            ).status_code in (400, 404)
        # Nor sent to the model as one: a note names it.
        fake.enqueue(text_reply("ok"))
        run = await srv.client.post(
            f"/api/conversations/{cid}/messages", json={"content": "see", "attachments": [path]}
        )
        await srv.run_finished(cid, run.json()["run_id"])
        content = fake.requests[-1]["messages"][-1]["content"]
        text_only = content if isinstance(content, str) else json.dumps(content)
        assert "image_url" not in text_only and f"{path}: attached" in text_only


async def test_an_image_over_the_model_cap_is_a_note_not_a_block(tmp_path: Path) -> None:
    async with serve(tmp_path) as (srv, fake):
        made = await srv.client.post("/api/conversations", json={"model": "gpt-4o"})
        cid = made.json()["id"]
        big = PNG + b"\0" * (5 * 2**20)  # a PNG signature, over the 5 MB a request may carry
        [path] = (await upload(srv, cid, big, "huge.png")).json()["files"]
        fake.enqueue(text_reply("ok"))
        run = await srv.client.post(
            f"/api/conversations/{cid}/messages", json={"content": "see", "attachments": [path]}
        )
        await srv.run_finished(cid, run.json()["run_id"])
        content = fake.requests[-1]["messages"][-1]["content"]
        text_only = content if isinstance(content, str) else json.dumps(content)
        assert "image_url" not in text_only and "larger than 5 MB" in text_only
