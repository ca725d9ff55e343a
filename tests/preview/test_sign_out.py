"""A preview cookie lasts only as long as the Burrow sign-in that opened it: a logout, a
revoked API token, a password change (for the other sessions) and a disabled account close
the user's previews too, not twelve hours later."""

from __future__ import annotations

import httpx

from tests.api.harness import log_in
from tests.preview.harness import Preview

PORT = 8040


async def _bob(preview: Preview) -> tuple[str, str]:
    """Bob, an ordinary user, with a conversation whose service runs; (his id, its id)."""
    server = preview.server
    made = await server.client.post(
        "/api/users", json={"username": "bob", "password": "bob-password-1"}
    )
    assert made.status_code == 201, made.text
    async with _browser(preview) as bob:
        await log_in(bob, "bob", "bob-password-1")
        created = await bob.post("/api/conversations", json={"title": "bob's"})
        assert created.status_code == 201, created.text
        cid = str(created.json()["id"])
    await Preview(server, cid, preview.proxy).start(PORT, "app_server.py")
    return str(made.json()["id"]), cid


def _browser(preview: Preview) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=preview.server.base_url, timeout=30)


async def _link(preview: Preview, api: httpx.AsyncClient, cid: str) -> str:
    listed = await api.get(f"/api/conversations/{cid}/previews")
    assert listed.status_code == 200, listed.text
    [url] = [p["url"] for p in listed.json() if p["port"] == PORT]
    return str(url)


async def _exchange(preview: Preview, cid: str, url: str) -> str:
    """Follow a signed link as the iframe does; the preview cookie it sets."""
    host = preview.host(PORT, cid)
    response = await preview.proxy.get(httpx.URL(url).raw_path.decode(), headers={"host": host})
    assert response.status_code == 303, response.text
    return response.headers["set-cookie"].split(";")[0].partition("=")[2]


async def _page(preview: Preview, cid: str, cookie: str) -> httpx.Response:
    headers = {"host": preview.host(PORT, cid), "cookie": f"burrow_preview={cookie}"}
    return await preview.proxy.get("/", headers=headers)


def _closed(response: httpx.Response) -> bool:
    return response.status_code == 401 and "has ended" in response.text


async def test_logout_and_a_revoked_api_token_close_the_previews_they_opened(
    preview: Preview,
) -> None:
    _, cid = await _bob(preview)
    async with _browser(preview) as bob, _browser(preview) as laptop:
        await log_in(bob, "bob", "bob-password-1")
        await log_in(laptop, "bob", "bob-password-1")
        cookie = await _exchange(preview, cid, await _link(preview, bob, cid))
        elsewhere = await _exchange(preview, cid, await _link(preview, laptop, cid))
        unused = await _link(preview, bob, cid)
        assert (await _page(preview, cid, cookie)).text == "path /"

        assert (await bob.post("/api/auth/logout", json={})).status_code == 204
        assert _closed(await _page(preview, cid, cookie))
        refused = await preview.proxy.get(
            httpx.URL(unused).raw_path.decode(), headers={"host": preview.host(PORT, cid)}
        )
        assert _closed(refused) and "set-cookie" not in refused.headers
        # Bob's other session is not the one that ended.
        assert (await _page(preview, cid, elsewhere)).text == "path /"

        # A link asked for with an API token lasts as long as the token.
        made = await laptop.post("/api/auth/tokens", json={"name": "cli"})
        assert made.status_code == 201, made.text
        async with _browser(preview) as cli:
            cli.headers["authorization"] = f"Bearer {made.json()['token']}"
            by_token = await _exchange(preview, cid, await _link(preview, cli, cid))
        assert (await _page(preview, cid, by_token)).text == "path /"
        revoked = await laptop.delete(f"/api/auth/tokens/{made.json()['id']}")
        assert revoked.status_code == 204
        assert _closed(await _page(preview, cid, by_token))
        assert (await _page(preview, cid, elsewhere)).text == "path /"


async def test_a_password_change_and_a_disabled_account_close_the_previews(
    preview: Preview,
) -> None:
    bob_id, cid = await _bob(preview)
    async with _browser(preview) as bob, _browser(preview) as stolen:
        await log_in(bob, "bob", "bob-password-1")
        await log_in(stolen, "bob", "bob-password-1")  # a session someone else holds
        own = await _exchange(preview, cid, await _link(preview, bob, cid))
        theirs = await _exchange(preview, cid, await _link(preview, stolen, cid))

        changed = await bob.post(
            "/api/me/password", json={"current": "bob-password-1", "new": "bob-password-2"}
        )
        assert changed.status_code == 204, changed.text
        # The other sessions end, and their previews with them; the one that asked stays.
        assert _closed(await _page(preview, cid, theirs))
        assert (await _page(preview, cid, own)).text == "path /"

        disabled = await preview.server.client.patch(
            f"/api/users/{bob_id}", json={"disabled": True}
        )
        assert disabled.status_code == 200, disabled.text
        assert _closed(await _page(preview, cid, own))
