"""Who gets in: the owner through a fresh signed link or its cookie; nobody else, and a
preview page cannot use the API with the user's credentials."""

from __future__ import annotations

import socket
import time

import httpx
import pytest
import websockets
from websockets.asyncio.client import connect

from burrow.preview.links import PreviewLinks
from burrow.store.accounts import token_digest
from tests.preview.harness import Preview


def _links(preview: Preview) -> PreviewLinks:
    return PreviewLinks.from_settings(preview.server.services.settings)


def _session(preview: Preview) -> str:
    """The digest of the test client's sign-in, which grants are bound to."""
    return token_digest(preview.server.client.cookies["burrow_session"])


async def _owner_id(preview: Preview) -> str:
    me = await preview.server.client.get("/api/me")
    assert me.status_code == 200, me.text
    return str(me.json()["id"])


async def test_a_wrong_host_is_not_a_preview(preview: Preview) -> None:
    for host in ("evil.example", f"127.0.0.1:{preview.port}", f"x-{preview.cid}.preview.localhost"):
        response = await preview.proxy.get("/", headers={"host": host})
        assert response.status_code == 404
        assert "Not a preview address" in response.text


async def test_no_token_and_no_cookie_gets_the_explanation(preview: Preview) -> None:
    await preview.start(8010, "app_server.py")
    for cookie in (None, "not-a-token", "a.b"):
        response = await preview.get(8010, "/", cookie)
        assert response.status_code == 401
        assert response.headers["content-type"].startswith("text/html")
        assert "Open this preview from Burrow" in response.text
        assert "Only the owner of the conversation" in response.text
    garbage = await preview.get(8010, "/?burrow_token=forged.token", None)
    assert garbage.status_code == 401


async def test_an_expired_link_or_cookie_is_refused(preview: Preview) -> None:
    await preview.start(8011, "app_server.py")
    owner, signer = await _owner_id(preview), _links(preview).signer
    session = _session(preview)
    token = signer.mint("link", owner, preview.cid, 8011, ttl=-1, session=session)
    expired = await preview.get(8011, f"/?burrow_token={token}", None)
    assert expired.status_code == 401
    assert "This preview link has expired" in expired.text
    cookie = signer.mint("cookie", owner, preview.cid, 8011, ttl=-1, session=session)
    assert (await preview.get(8011, "/", cookie)).status_code == 401
    # A link token is not a cookie and the other way round.
    link = signer.mint("link", owner, preview.cid, 8011, ttl=60, session=session)
    assert (await preview.get(8011, "/", link)).status_code == 401
    fresh = signer.mint("cookie", owner, preview.cid, 8011, ttl=60, session=session)
    assert (await preview.get(8011, "/", fresh)).status_code == 200


async def test_a_token_for_another_conversation_port_or_user_is_not_found(
    preview: Preview,
) -> None:
    await preview.start(8012, "app_server.py")
    other_cid = await preview.server.create_conversation("other")
    owner, signer = await _owner_id(preview), _links(preview).signer
    session = _session(preview)
    for user, cid, port in (
        (owner, other_cid, 8012),  # the owner's, but another conversation
        (owner, preview.cid, 9999),  # another port
        ("u_someone_else", preview.cid, 8012),  # not the owner of this conversation
    ):
        token = signer.mint("link", user, cid, port, ttl=60, session=session)
        response = await preview.get(8012, f"/?burrow_token={token}", None)
        assert response.status_code == 404, (user, cid, port)
        assert "burrow_preview" not in response.headers.get("set-cookie", "")
    # A cookie of another preview (tossed onto the shared parent domain) opens nothing here.
    foreign = signer.mint("cookie", owner, other_cid, 8012, ttl=60, session=session)
    assert (await preview.get(8012, "/", foreign)).status_code == 401


async def test_a_link_signed_with_another_key_is_refused(preview: Preview) -> None:
    from burrow.preview.tokens import PreviewSigner

    await preview.start(8013, "app_server.py")
    owner, session = await _owner_id(preview), _session(preview)
    token = PreviewSigner(b"k" * 32).mint("link", owner, preview.cid, 8013, 60, session=session)
    assert (await preview.get(8013, f"/?burrow_token={token}", None)).status_code == 401


async def test_a_preview_page_cannot_read_the_api_with_credentials(preview: Preview) -> None:
    origin = f"http://5173-{preview.cid}.preview.localhost:{preview.port}"
    client = preview.server.client  # carries the user's session cookie, as a browser would
    read = await client.get("/api/conversations", headers={"origin": origin})
    assert "access-control-allow-origin" not in read.headers
    assert "access-control-allow-credentials" not in read.headers
    preflight = await client.options(
        "/api/conversations",
        headers={
            "origin": origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type",
        },
    )
    assert "access-control-allow-origin" not in preflight.headers


async def test_a_preview_page_cannot_post_to_the_api(preview: Preview) -> None:
    origin = f"http://5173-{preview.cid}.preview.localhost:{preview.port}"
    before = len((await preview.server.client.get("/api/conversations")).json())
    response = await preview.server.client.post(
        "/api/conversations", json={"title": "csrf"}, headers={"origin": origin}
    )
    assert response.status_code == 403
    assert len((await preview.server.client.get("/api/conversations")).json()) == before


async def test_the_signed_link_is_short_lived(preview: Preview) -> None:
    await preview.start(8014, "app_server.py")
    url = await preview.signed_url(8014)
    token = url.split("burrow_token=", 1)[1]
    grant = _links(preview).signer.verify("link", token)
    ttl = preview.server.services.settings.preview_token_ttl
    assert grant.user_id == await _owner_id(preview)
    assert time.time() < grant.expires <= time.time() + ttl + 1


async def test_a_used_link_cannot_be_replayed_and_the_cookie_keeps_working(
    preview: Preview,
) -> None:
    await preview.start(8015, "app_server.py")
    url = httpx.URL(await preview.signed_url(8015))
    first = await preview.proxy.get(url.raw_path.decode(), headers={"host": preview.host(8015)})
    assert first.status_code == 303
    cookie = first.headers["set-cookie"].split(";")[0].partition("=")[2]
    # A copy of the link (history, a log, a shoulder) opens nothing once it has been used.
    for _ in range(2):
        replay = await preview.proxy.get(
            url.raw_path.decode(), headers={"host": preview.host(8015)}
        )
        assert replay.status_code == 401
        assert "set-cookie" not in replay.headers
        assert "has been used already" in replay.text
    # The owner's browser reloads on the cookie; a fresh link from Burrow works once more.
    for _ in range(3):
        assert (await preview.get(8015, "/", cookie)).text == "path /"
    assert await preview.sign_in(8015)


async def test_a_link_used_for_a_websocket_is_spent_too(preview: Preview) -> None:
    await preview.start(8016, "dev_server.py")
    token = (await preview.signed_url(8016)).split("burrow_token=", 1)[1]

    async def echo() -> str:
        sock = socket.create_connection(("127.0.0.1", preview.port))
        async with connect(f"ws://{preview.host(8016)}/?burrow_token={token}", sock=sock) as ws:
            await ws.send("ping")
            return str(await ws.recv())

    assert await echo() == "ping"
    with pytest.raises(websockets.InvalidStatus) as refused:
        await echo()
    assert refused.value.response.status_code == 403
    assert (await preview.get(8016, f"/?burrow_token={token}", None)).status_code == 401


async def test_open_in_a_new_tab_signs_a_fresh_link_each_time(preview: Preview) -> None:
    await preview.start(8017, "app_server.py")
    client = preview.server.client
    opened = []
    for _ in range(2):
        response = await client.get(f"/api/conversations/{preview.cid}/previews/8017/open")
        assert response.status_code == 303
        assert response.headers["cache-control"] == "no-store"
        opened.append(httpx.URL(response.headers["location"]))
    assert opened[0] != opened[1]
    for url in opened:
        assert url.host == preview.host(8017).split(":")[0]
        exchange = await preview.proxy.get(
            url.raw_path.decode(), headers={"host": preview.host(8017)}
        )
        assert exchange.status_code == 303
    unknown = await client.get("/api/conversations/c_0000000000000000/previews/8017/open")
    assert unknown.status_code == 404
    assert (
        await client.get(f"/api/conversations/{preview.cid}/previews/0/open")
    ).status_code == 422
