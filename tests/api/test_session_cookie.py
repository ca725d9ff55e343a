"""The session cookie cannot be planted: `__Host-` over https, and a request that carries
two session cookies is refused rather than read as whichever came last.

The attack: with the app on burrow.example.com and previews under it, a preview page sets
`burrow_session=<the attacker's>; domain=burrow.example.com`. The browser then sends the
victim's cookie and the attacker's; Starlette keeps the last, so the app answers as the
attacker and the victim saves their secrets into the attacker's account.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import ADMIN_PASSWORD, RunningServer, log_in, running_server
from tests.api.test_terminals import expect_refused, open_terminal, session_cookie, ws_url

HTTPS = {"X-Forwarded-Proto": "https"}  # from 127.0.0.1, a trusted proxy in these tests


async def _attacker_session(srv: RunningServer) -> str:
    """Mallory, an ordinary user of the same server, and her own session token."""
    made = await srv.client.post(
        "/api/users", json={"username": "mallory", "password": "mallory-password"}
    )
    assert made.status_code == 201, made.text
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=10) as mallory:
        await log_in(mallory, "mallory", "mallory-password")
        return mallory.cookies["burrow_session"]


async def test_two_session_cookies_are_refused_not_resolved_to_the_last(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        victim = srv.client.cookies["burrow_session"]
        planted = await _attacker_session(srv)
        async with httpx.AsyncClient(base_url=srv.base_url, timeout=10) as browser:
            # What the victim's browser sends once the preview has set its cookie on the
            # parent domain: the host's own first (older), the planted one after it.
            for cookie in (
                f"burrow_session={victim}; burrow_session={planted}",
                f"burrow_session={planted}; burrow_session={victim}",
                f"burrow_session={victim}; __Host-burrow_session={planted}",
            ):
                me = await browser.get("/api/me", headers={"Cookie": cookie})
                assert me.status_code == 400, (cookie, me.text)
                error = me.json()["error"]
                assert error["code"] == "duplicate_session_cookie"
                assert "Clear this site's cookies" in error["message"]
            # The secret the victim types goes into nobody's account.
            saved = await browser.put(
                "/api/secrets/GITHUB_TOKEN",
                json={"value": "ghp_victims"},
                headers={"Cookie": f"burrow_session={victim}; burrow_session={planted}"},
            )
            assert saved.status_code == 400, saved.text
            as_mallory = {"Cookie": f"burrow_session={planted}"}
            mallorys = await browser.get("/api/secrets", headers=as_mallory)
            assert mallorys.status_code == 200 and mallorys.json() == []
            # One cookie is the usual case and works; so does a Bearer token beside two.
            alone = await browser.get("/api/me", headers={"Cookie": f"burrow_session={victim}"})
            assert alone.status_code == 200 and alone.json()["username"] == "admin"
            made = await srv.client.post("/api/auth/tokens", json={"name": "cli"})
            bearer = {"Authorization": f"Bearer {made.json()['token']}"}
            cli = await browser.get(
                "/api/me",
                headers={**bearer, "Cookie": f"burrow_session={victim}; burrow_session={planted}"},
            )
            assert cli.status_code == 200 and cli.json()["username"] == "admin"


async def test_logout_with_two_session_cookies_ends_both(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        victim = srv.client.cookies["burrow_session"]
        planted = await _attacker_session(srv)
        async with httpx.AsyncClient(base_url=srv.base_url, timeout=10) as browser:
            both = f"burrow_session={victim}; burrow_session={planted}"
            out = await browser.post("/api/auth/logout", json={}, headers={"Cookie": both})
            assert out.status_code == 204
            for token in (victim, planted):
                me = await browser.get("/api/me", headers={"Cookie": f"burrow_session={token}"})
                assert me.status_code == 401


async def test_over_https_the_cookie_is_host_only_and_a_plain_one_admits_nobody(
    tmp_path: Path,
) -> None:
    async with running_server(
        tmp_path, lambda: ScriptedProvider([]), trusted_proxies="127.0.0.1"
    ) as srv:
        planted = await _attacker_session(srv)
        async with httpx.AsyncClient(base_url=srv.base_url, timeout=10) as browser:
            login = await browser.post(
                "/api/auth/login",
                json={"username": "admin", "password": ADMIN_PASSWORD},
                headers=HTTPS,
            )
            assert login.status_code == 200, login.text
            cookies = login.headers.get_list("set-cookie")
            [given] = [c for c in cookies if c.startswith("__Host-burrow_session=")]
            attributes = [a.strip().lower() for a in given.split(";")[1:]]
            assert "secure" in attributes and "path=/" in attributes and "httponly" in attributes
            assert not any(a.startswith("domain") for a in attributes)
            # A plain cookie from before is ended in the same answer.
            [ended] = [c for c in cookies if c.startswith("burrow_session=")]
            assert "max-age=0" in ended.lower()
            token = given.split(";")[0].partition("=")[2]

            me = await browser.get(
                "/api/me", headers={**HTTPS, "Cookie": f"__Host-burrow_session={token}"}
            )
            assert me.status_code == 200 and me.json()["username"] == "admin"
            # A sibling host can set the plain name on the parent domain, never the
            # __Host- one: over https the plain name signs nobody in.
            alone = await browser.get(
                "/api/me", headers={**HTTPS, "Cookie": f"burrow_session={planted}"}
            )
            assert alone.status_code == 401, alone.text
            both = await browser.get(
                "/api/me",
                headers={
                    **HTTPS,
                    "Cookie": f"__Host-burrow_session={token}; burrow_session={planted}",
                },
            )
            assert both.status_code == 400
            assert both.json()["error"]["code"] == "duplicate_session_cookie"
            # Over plain http (localhost) the name stays burrow_session.
            plain = await browser.get("/api/me", headers={"Cookie": f"burrow_session={planted}"})
            assert plain.status_code == 200 and plain.json()["username"] == "mallory"


async def test_a_terminal_socket_with_two_session_cookies_is_refused(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        victim = srv.client.cookies["burrow_session"]
        planted = await _attacker_session(srv)
        cid = await srv.create_conversation()
        tid = await open_terminal(srv, cid)
        both = {"Cookie": f"burrow_session={planted}; burrow_session={victim}"}
        async with asyncio.timeout(10):  # an accepted socket would wait for output
            await expect_refused(ws_url(srv, cid, tid), both, 4401)
        # The victim's own cookie alone attaches, as before.
        async with connect(ws_url(srv, cid, tid), additional_headers=session_cookie(srv.client)):
            pass
