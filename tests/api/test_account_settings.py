"""Settings for one's own account and, for administrators, everyone's: changing a password,
API tokens, disabling and promoting accounts (DESIGN.md §8)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import ADMIN_PASSWORD, RunningServer, log_in, running_server

PASSWORD = "alice-password-1"


@asynccontextmanager
async def _client(
    srv: RunningServer, username: str = "", password: str = ""
) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as client:
        if username:
            await log_in(client, username, password)
        yield client


async def _add_user(srv: RunningServer, username: str, *, is_admin: bool = False) -> str:
    created = await srv.client.post(
        "/api/users", json={"username": username, "password": PASSWORD, "is_admin": is_admin}
    )
    assert created.status_code == 201, created.text
    uid: str = created.json()["id"]
    return uid


def _error(response: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    return error


async def test_changing_the_password_ends_the_other_sessions(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        await _add_user(srv, "alice")
        async with (
            _client(srv, "alice", PASSWORD) as here,
            _client(srv, "alice", PASSWORD) as there,
        ):
            token = (await here.post("/api/auth/tokens", json={"name": "ci"})).json()["token"]
            short = await here.post("/api/me/password", json={"current": PASSWORD, "new": "x"})
            assert short.status_code == 400 and _error(short)["code"] == "password_too_short"
            same = await here.post("/api/me/password", json={"current": PASSWORD, "new": PASSWORD})
            assert _error(same)["code"] == "password_unchanged"

            changed = await here.post(
                "/api/me/password", json={"current": PASSWORD, "new": "a-new-password"}
            )
            assert changed.status_code == 204, changed.text
            assert (await here.get("/api/me")).status_code == 200  # the asking session stays
            assert (await there.get("/api/me")).status_code == 401  # the other one ends
            bearer = {"Authorization": f"Bearer {token}"}
            assert (await there.get("/api/me", headers=bearer)).status_code == 200  # tokens stay

        async with _client(srv) as fresh:
            old = await fresh.post(
                "/api/auth/login", json={"username": "alice", "password": PASSWORD}
            )
            assert old.status_code == 401
            await log_in(fresh, "alice", "a-new-password")


async def test_a_wrong_current_password_is_a_400_counted_as_a_failed_login(
    tmp_path: Path,
) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        await _add_user(srv, "alice")
        async with _client(srv, "alice", PASSWORD) as alice:
            for _ in range(10):  # LoginThrottle's max_failures
                wrong = await alice.post(
                    "/api/me/password", json={"current": "guess", "new": "a-new-password"}
                )
                assert wrong.status_code == 400
                assert _error(wrong) == {
                    "code": "wrong_password",
                    "message": "The current password is wrong: nothing was changed.",
                }
            # Guessing here is guessing at the login: both are now closed to this client,
            # even with the right password.
            right = {"current": PASSWORD, "new": "a-new-password"}
            blocked = await alice.post("/api/me/password", json=right)
            assert blocked.status_code == 429 and "Retry-After" in blocked.headers
            login = {"username": "alice", "password": PASSWORD}
            async with _client(srv) as other:
                assert (await other.post("/api/auth/login", json=login)).status_code == 429
            assert (await srv.client.get("/api/me")).status_code == 200  # admin unaffected


async def test_api_tokens_are_listed_without_values_and_only_their_owner_revokes(
    tmp_path: Path,
) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        await _add_user(srv, "alice")
        admin_token = await srv.client.post("/api/auth/tokens", json={"name": "admin's"})
        admin_id = admin_token.json()["id"]
        async with _client(srv, "alice", PASSWORD) as alice:
            listed = (await alice.get("/api/auth/tokens")).json()
            assert listed == []
            # Another user's token id answers 404, like a missing one, and stays valid.
            stolen = await alice.delete(f"/api/auth/tokens/{admin_id}")
            assert stolen.status_code == 404 and _error(stolen)["code"] == "not_found"
            bearer = {"Authorization": f"Bearer {admin_token.json()['token']}"}
            async with _client(srv) as anonymous:
                assert (await anonymous.get("/api/me", headers=bearer)).json()[
                    "username"
                ] == "admin"

            mine = (await alice.post("/api/auth/tokens", json={"name": "laptop"})).json()
            [row] = (await alice.get("/api/auth/tokens")).json()
            assert set(row) == {"id", "name", "created_at"} and row["id"] == mine["id"]
            assert mine["token"] not in (await alice.get("/api/auth/tokens")).text
            assert (await alice.delete(f"/api/auth/tokens/{mine['id']}")).status_code == 204
            gone = {"Authorization": f"Bearer {mine['token']}"}
            async with _client(srv) as anonymous:
                assert (await anonymous.get("/api/me", headers=gone)).status_code == 401


async def test_a_disabled_account_is_shut_out_at_once(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        uid = await _add_user(srv, "alice")
        async with _client(srv, "alice", PASSWORD) as alice:
            token = (await alice.post("/api/auth/tokens", json={})).json()["token"]
            bearer = {"Authorization": f"Bearer {token}"}
            # Both are verified (and so cached for SESSION_CACHE_SECONDS) before disabling.
            assert (await alice.get("/api/me")).status_code == 200
            assert (await alice.get("/api/me", headers=bearer)).status_code == 200

            changed = await srv.client.patch(f"/api/users/{uid}", json={"disabled": True})
            assert changed.status_code == 200 and changed.json()["disabled"] is True
            assert (await alice.get("/api/me")).status_code == 401
            assert (await alice.get("/api/me", headers=bearer)).status_code == 401
            login = {"username": "alice", "password": PASSWORD}
            assert (await alice.post("/api/auth/login", json=login)).status_code == 401

            await srv.client.patch(f"/api/users/{uid}", json={"disabled": False})
            # The session ended for good; the API token works again once enabled.
            assert (await alice.get("/api/me")).status_code == 401
            assert (await alice.get("/api/me", headers=bearer)).status_code == 200
            await log_in(alice, "alice", PASSWORD)


async def test_only_admins_change_accounts_and_never_the_last_admin(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        admin_id = (await srv.client.get("/api/me")).json()["id"]
        for change in ({"is_admin": False}, {"disabled": True}):
            refused = await srv.client.patch(f"/api/users/{admin_id}", json=change)
            assert refused.status_code == 409, refused.text
            assert _error(refused) == {
                "code": "last_admin",
                "message": "admin is the last enabled administrator: make another account "
                "an administrator first.",
            }
        missing = await srv.client.patch("/api/users/u_nobody", json={"disabled": True})
        assert missing.status_code == 404

        uid = await _add_user(srv, "alice")
        async with _client(srv, "alice", PASSWORD) as alice:
            for method, path in (("PATCH", f"/api/users/{admin_id}"), ("GET", "/api/users")):
                refused = await alice.request(method, path, json={"disabled": True})
                assert refused.status_code == 403 and _error(refused)["code"] == "forbidden"
            assert (
                await alice.patch(f"/api/users/{uid}", json={"is_admin": True})
            ).status_code == 403

            promoted = await srv.client.patch(f"/api/users/{uid}", json={"is_admin": True})
            assert promoted.json()["is_admin"] is True
            assert (await alice.get("/api/me")).json()["is_admin"] is True  # not the cached one
            # Now alice may demote the first admin, and then is the last one herself.
            demoted = await alice.patch(f"/api/users/{admin_id}", json={"is_admin": False})
            assert demoted.status_code == 200
            assert (
                await alice.patch(f"/api/users/{uid}", json={"disabled": True})
            ).status_code == 409
            reset = await alice.patch(f"/api/users/{admin_id}", json={"password": "reset-by-alice"})
            assert reset.status_code == 200
            assert (await srv.client.get("/api/me")).status_code == 401  # its sessions ended
            listed = (await alice.get("/api/users")).json()
            assert [(u["username"], u["is_admin"]) for u in listed] == [
                ("admin", False),
                ("alice", True),
            ]
        async with _client(srv, "admin", "reset-by-alice") as admin:
            assert (await admin.get("/api/me")).json()["is_admin"] is False
        async with _client(srv) as anonymous:
            old = {"username": "admin", "password": ADMIN_PASSWORD}
            assert (await anonymous.post("/api/auth/login", json=old)).status_code == 401


async def test_two_admins_demoting_each_other_at_once_leave_one(
    tmp_path: Path, pg_url: str
) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([]), database_url=pg_url) as srv:
        admin_id = (await srv.client.get("/api/me")).json()["id"]
        for attempt in range(5):
            uid = await _add_user(srv, f"second{attempt}", is_admin=True)
            async with _client(srv, f"second{attempt}", PASSWORD) as second:
                answers = await asyncio.gather(
                    srv.client.patch(f"/api/users/{uid}", json={"is_admin": False}),
                    second.patch(f"/api/users/{admin_id}", json={"is_admin": False}),
                )
                codes = [a.status_code for a in answers]
                # The loser either met the last-admin guard (409) or, when the winner had
                # already committed, was no admin any more when its request was checked (403).
                assert sorted(codes) in ([200, 403], [200, 409]), [a.text for a in answers]
                winner = srv.client if codes[0] == 200 else second
                listed = (await winner.get("/api/users")).json()
                admins = [u["username"] for u in listed if u["is_admin"] and not u["disabled"]]
                assert admins == (["admin"] if winner is srv.client else [f"second{attempt}"])
                if winner is second:  # put the first admin back for the next round
                    await second.patch(f"/api/users/{admin_id}", json={"is_admin": True})
                    await second.patch(f"/api/users/{uid}", json={"is_admin": False})


async def test_oversized_or_malformed_bodies_are_refused_before_hashing(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        admin_id = (await srv.client.get("/api/me")).json()["id"]
        huge = "x" * 1_000_001
        for path, body in (
            ("/api/me/password", {"current": huge, "new": "a-new-password"}),
            ("/api/me/password", {"current": ADMIN_PASSWORD, "new": huge}),
            ("/api/me/password", {"current": ADMIN_PASSWORD}),
        ):
            refused = await srv.client.post(path, json=body)
            assert refused.status_code == 422, refused.text
        for change in ({"password": huge}, {"password": "short"}, {"is_admin": "maybe"}):
            refused = await srv.client.patch(f"/api/users/{admin_id}", json=change)
            assert refused.status_code == 422, refused.text
        # None of it counted as a failed login, and the password is unchanged.
        async with _client(srv, "admin", ADMIN_PASSWORD) as again:
            assert (await again.get("/api/me")).status_code == 200
