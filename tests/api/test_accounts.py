"""Accounts: login, logout, API tokens, rate limiting, and every route closed to strangers."""

from __future__ import annotations

from pathlib import Path

import httpx

from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, log_in, running_server

# The A2A agent card is public by design: peers read it to learn how to authenticate.
OPEN_ROUTES = {
    "/api/health",
    "/api/auth/login",
    "/api/auth/logout",
    "/api/auth/session",  # says "signed out" to strangers, nothing more (tested below)
    "/.well-known/agent-card.json",
    # Signed by GitHub (X-Hub-Signature-256), not a login: tests/api/test_github_webhook.py.
    "/api/webhooks/github",
}


async def _stranger(srv: RunningServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=srv.base_url, timeout=10)


async def test_every_route_but_health_and_login_needs_a_login(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        cid = await srv.create_conversation()
        paths = srv.app.openapi()["paths"]
        assert len(paths) > 15
        async with await _stranger(srv) as anonymous:
            for template, operations in paths.items():
                if template in OPEN_ROUTES:
                    continue
                path = template.replace("{cid}", cid).replace("{request_id}", "x")
                path = path.replace("{token_id}", "x" * 16).replace("{aid}", "a_" + "0" * 16)
                for method in operations:
                    response = await anonymous.request(method, path, json={})
                    assert response.status_code == 401, (method, path, response.text)
                    assert response.json()["error"]["code"] == "unauthorized"


async def test_the_session_probe_answers_signed_out_without_an_error(tmp_path: Path) -> None:
    async with (
        running_server(tmp_path, lambda: ScriptedProvider([])) as srv,
        await _stranger(srv) as client,
    ):
        out = await client.get("/api/auth/session")
        assert out.status_code == 200 and out.json() == {"signed_in": False, "user": None}
        # A forged or revoked cookie is signed out too, never someone.
        client.cookies.set("burrow_session", "not-a-real-session-token")
        forged = await client.get("/api/auth/session")
        assert forged.json() == {"signed_in": False, "user": None}
        client.cookies.clear()
        bearer = {"Authorization": "Bearer not-a-token"}
        assert (await client.get("/api/auth/session", headers=bearer)).json()["signed_in"] is False
        assert (await client.get("/api/me")).status_code == 401  # /api/me keeps its contract

        await log_in(client, "admin", "burrow-test-admin-password")
        inside = (await client.get("/api/auth/session")).json()
        assert inside["signed_in"] is True and inside["user"]["username"] == "admin"
        assert inside["user"] == (await client.get("/api/me")).json()
        await client.post("/api/auth/logout", json={})
        assert (await client.get("/api/auth/session")).json()["signed_in"] is False


async def test_login_logout_and_wrong_passwords(tmp_path: Path) -> None:
    async with (
        running_server(tmp_path, lambda: ScriptedProvider([])) as srv,
        await _stranger(srv) as client,
    ):
        wrong = await client.post("/api/auth/login", json={"username": "admin", "password": "nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "bad_credentials"
        nobody = await client.post("/api/auth/login", json={"username": "ghost", "password": "x"})
        assert nobody.status_code == 401

        await log_in(client, "admin", "burrow-test-admin-password")
        cookie = client.cookies.jar
        [session] = [c for c in cookie if c.name == "burrow_session"]
        assert session.has_nonstandard_attr("HttpOnly")
        assert (await client.get("/api/me")).json()["username"] == "admin"

        out = await client.post("/api/auth/logout", json={})
        assert out.status_code == 204
        assert (await client.get("/api/me")).status_code == 401


async def test_login_is_rate_limited(tmp_path: Path) -> None:
    async with (
        running_server(tmp_path, lambda: ScriptedProvider([])) as srv,
        await _stranger(srv) as client,
    ):
        for _ in range(10):
            r = await client.post(
                "/api/auth/login", json={"username": "admin", "password": "guess"}
            )
            assert r.status_code == 401
        blocked = await client.post(
            "/api/auth/login",
            json={"username": "admin", "password": "burrow-test-admin-password"},
        )
        assert blocked.status_code == 429
        assert "try again in" in blocked.json()["error"]["message"]


async def test_api_tokens_for_the_command_line(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        created = await srv.client.post("/api/auth/tokens", json={"name": "laptop"})
        assert created.status_code == 201
        token, token_id = created.json()["token"], created.json()["id"]
        assert token.startswith("bw_")
        listed = (await srv.client.get("/api/auth/tokens")).json()
        assert [t["name"] for t in listed] == ["laptop"] and "token" not in listed[0]
        async with await _stranger(srv) as cli:
            headers = {"Authorization": f"Bearer {token}"}
            assert (await cli.get("/api/me", headers=headers)).json()["username"] == "admin"
            assert (await srv.client.delete(f"/api/auth/tokens/{token_id}")).status_code == 204
            assert (await cli.get("/api/me", headers=headers)).status_code == 401


async def test_another_users_conversation_answers_404_everywhere(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        cid = await srv.create_conversation("alice's")
        made = await srv.client.post(
            "/api/users", json={"username": "bob", "password": "bob-password-1"}
        )
        assert made.status_code == 201, made.text
        async with await _stranger(srv) as bob:
            await log_in(bob, "bob", "bob-password-1")
            assert (await bob.get("/api/conversations")).json() == []
            base = f"/api/conversations/{cid}"
            attempts = [
                ("GET", base, None),
                ("PATCH", base, {"title": "mine now"}),
                ("DELETE", base, None),
                ("POST", f"{base}/messages", {"content": "hi"}),
                ("POST", f"{base}/interrupt", {}),
                ("POST", f"{base}/approvals/ap_x", {"decision": "allow_once"}),
                ("GET", f"{base}/events?format=json", None),
                ("GET", f"{base}/events", None),
                ("GET", f"{base}/files?path=.", None),
                ("GET", f"{base}/files/content?path=x", None),
                ("GET", f"{base}/sandbox", None),
                ("POST", f"{base}/sandbox/restart", {}),
                ("POST", f"{base}/terminals", {"cols": 80, "rows": 24}),
                ("GET", f"{base}/terminals", None),
                ("DELETE", f"{base}/terminals/t_x", None),
                ("GET", f"{base}/previews", None),
            ]
            for method, path, body in attempts:
                response = await bob.request(method, path, json=body)
                assert response.status_code == 404, (method, path, response.status_code)
                assert response.json()["error"]["code"] == "not_found"
            not_admin = await bob.post(
                "/api/users", json={"username": "eve", "password": "12345678"}
            )
            assert not_admin.status_code == 403
            model = await bob.put("/api/settings/model", json={"model": "demo"})
            assert model.status_code == 403
        # Nothing of alice's changed.
        mine = (await srv.client.get(f"/api/conversations/{cid}")).json()
        assert mine["title"] == "alice's" and mine["last_seq"] == 0


async def test_csrf_cross_origin_and_non_json_requests_are_refused(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        evil = await srv.client.post(
            "/api/conversations",
            json={"title": "x"},
            headers={"Origin": "http://5173-c_abc.preview.localhost:8421"},
        )
        assert evil.status_code == 403 and evil.json()["error"]["code"] == "cross_origin"
        form = await srv.client.post(
            "/api/conversations",
            content=b"title=x",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert form.status_code == 415 and form.json()["error"]["code"] == "json_required"
        own = await srv.client.post(
            "/api/conversations", json={"title": "ok"}, headers={"Origin": srv.base_url}
        )
        assert own.status_code == 201
        assert (await srv.client.get("/api/conversations")).status_code == 200
        # No CORS: a preview page cannot read the API with credentials.
        listing = await srv.client.get(
            "/api/conversations", headers={"Origin": "http://5173-c_abc.preview.localhost:8421"}
        )
        assert "access-control-allow-origin" not in listing.headers
