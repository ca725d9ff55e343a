"""X-Forwarded-Host/-Proto: the CSRF guard and the terminal socket believe them only from a
trusted proxy (BURROW_TRUSTED_PROXIES)."""

from __future__ import annotations

from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from burrow.api.forwarded import TrustedProxies
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import ADMIN_PASSWORD, running_server
from tests.api.test_terminals import open_terminal, session_cookie, ws_url

EVIL = "evil.example"
# What a page on another origin sends, plus headers naming that origin as "ours".
FORGED = {"Origin": f"http://{EVIL}", "X-Forwarded-Host": EVIL, "X-Forwarded-Proto": "http"}


async def test_forged_forwarded_host_does_not_pass_the_csrf_guard(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        r = await srv.client.post("/api/conversations", json={}, headers=FORGED)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "cross_origin"
        # The terminal socket's Origin check is not fooled either.
        cid = await srv.create_conversation()
        tid = await open_terminal(srv, cid)
        with pytest.raises(InvalidStatus) as refused:
            async with connect(
                ws_url(srv, cid, tid), additional_headers={**session_cookie(srv.client), **FORGED}
            ):
                pass
        assert refused.value.response.status_code == 403
        # X-Forwarded-Proto is not believed either: no Secure cookie over plain http.
        login = await srv.client.post(
            "/api/auth/login",
            json={"username": "admin", "password": ADMIN_PASSWORD},
            headers={"X-Forwarded-Proto": "https"},
        )
        assert "; secure" not in login.headers["set-cookie"].lower()


async def test_forwarded_host_and_proto_from_a_trusted_proxy(tmp_path: Path) -> None:
    async with running_server(
        tmp_path, lambda: ScriptedProvider([]), trusted_proxies="127.0.0.1"
    ) as srv:
        r = await srv.client.post("/api/conversations", json={}, headers=FORGED)
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        tid = await open_terminal(srv, cid)
        async with connect(
            ws_url(srv, cid, tid), additional_headers={**session_cookie(srv.client), **FORGED}
        ) as ws:
            await ws.send(b"echo OK-$((6*7))\n")
        login = await srv.client.post(
            "/api/auth/login",
            json={"username": "admin", "password": ADMIN_PASSWORD},
            headers={"X-Forwarded-Proto": "https"},
        )
        assert "; secure" in login.headers["set-cookie"].lower()


def test_trusted_proxies_are_addresses_or_networks() -> None:
    proxies = TrustedProxies.parse(" 10.0.0.0/8, ::1 ,")
    assert proxies.trusts("10.1.2.3") and proxies.trusts("::1")
    assert not proxies.trusts("127.0.0.1") and not proxies.trusts("not-an-address")
    assert not TrustedProxies.parse("").trusts("127.0.0.1")
    with pytest.raises(ValueError, match=r"BURROW_TRUSTED_PROXIES: 'proxy\.lan' is not an IP"):
        TrustedProxies.parse("127.0.0.1,proxy.lan")
