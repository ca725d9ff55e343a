"""Automations CRUD through the real server (DESIGN.md §9): the shape, strict validation
with precise 422s, the token shown once and stored hashed, and per-user isolation."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from tests.api.harness import running_server
from tests.api.test_secrets import database_bytes, second_user

BUDGET = {"steps": 5, "tokens": 10_000, "cost": 0.5, "wall_seconds": 60}


def automation(**overrides: Any) -> dict[str, Any]:
    return {
        "name": "nightly",
        "prompt": "Triage {{issue.title}}",
        "approval_mode": "auto",
        "budget": BUDGET,
        "result": "none",
        "triggers": [{"schedule": "0 3 * * *"}, {"http": True}],
        **overrides,
    }


async def create(client: httpx.AsyncClient, **overrides: Any) -> httpx.Response:
    return await client.post("/api/automations", json=automation(**overrides))


def refused(response: httpx.Response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    for word in words:
        assert word in message, (word, message)


async def test_create_read_update_delete_in_the_design_shape(tmp_path: Path) -> None:
    async with running_server(tmp_path, None) as srv:
        created = await create(srv.client, concurrency="skip")
        assert created.status_code == 201, created.text
        body = created.json()
        aid, token = body["id"], body["token"]
        assert token.startswith("bat_") and len(token) > 40
        assert body["budget"] == BUDGET and body["approval_mode"] == "auto"
        assert body["triggers"] == [{"schedule": "0 3 * * *"}, {"http": True}]
        assert body["concurrency"] == "skip" and body["runs"] == [] and body["repo"] is None
        assert body["timezone"] and body["next_fire_at"] is not None
        assert body["next_fire_at"][11:16] == "03:00"

        read = await srv.client.get(f"/api/automations/{aid}")
        assert read.status_code == 200 and "token" not in read.json()
        listed = await srv.client.get("/api/automations")
        assert [a["id"] for a in listed.json()] == [aid]

        patched = await srv.client.patch(
            f"/api/automations/{aid}", json={"name": "weekly", "triggers": [{"http": True}]}
        )
        assert patched.status_code == 200, patched.text
        assert patched.json()["name"] == "weekly" and patched.json()["next_fire_at"] is None
        assert patched.json()["prompt"] == "Triage {{issue.title}}"  # kept

        deleted = await srv.client.delete(f"/api/automations/{aid}")
        assert deleted.status_code == 204
        assert (await srv.client.get(f"/api/automations/{aid}")).status_code == 404
    rows = sqlite3.connect(tmp_path / "burrow.db").execute("select * from automations").fetchall()
    assert rows == []


async def test_the_token_is_stored_only_as_its_hash(tmp_path: Path) -> None:
    async with running_server(tmp_path, None) as srv:
        token = (await create(srv.client)).json()["token"]
    stored = (
        sqlite3.connect(tmp_path / "burrow.db")
        .execute("select token_hash from automations")
        .fetchone()[0]
    )
    assert stored == hashlib.sha256(token.encode()).hexdigest()
    assert token.encode() not in database_bytes(tmp_path)


async def test_bad_definitions_get_a_422_naming_what_is_wrong(tmp_path: Path) -> None:
    async with running_server(tmp_path, None) as srv:
        c = srv.client
        for missing in BUDGET:
            partial = {k: v for k, v in BUDGET.items() if k != missing}
            refused(await create(c, budget=partial), 422, f"budget.{missing}")
        refused(await create(c, budget={**BUDGET, "step": 3}), 422, "budget.step")
        refused(await create(c, budget={**BUDGET, "cost": 0}), 422, "budget.cost")
        refused(await create(c, approval_mode="plan"), 422, "approval_mode")
        refused(await create(c, approval_mode="yolo"), 422, "approval_mode")
        refused(await create(c, triggers=[{"schedule": "61 * * * *"}]), 422, "0-59")
        refused(await create(c, triggers=[{"schedule": "* * *"}]), 422, "5 fields")
        refused(await create(c, triggers=[{"schedule": "0 0 30 2 *"}]), 422, "never fires")
        refused(await create(c, triggers=[{"http": False}]), 422, "triggers")
        bad_repo = [{"github": {"repository": "../x", "events": ["issues.labeled"]}}]
        refused(await create(c, triggers=bad_repo), 422, "repository")
        anyone = [
            {"github": {"repository": "o/r", "events": ["issues.labeled"], "authors": ["NONE"]}}
        ]
        refused(await create(c, triggers=anyone), 422, "authors")
        refused(await create(c, result="pull_request"), 422, "needs a repo")
        refused(await create(c, attempts=5), 422, "attempts")
        refused(await create(c, environment="nope"), 422, "no environment")
        refused(await c.post("/api/automations", json={"name": "x"}), 422, "prompt", "budget")
        aid = (await create(c)).json()["id"]
        refused(await c.patch(f"/api/automations/{aid}", json={"result": "push"}), 422, "repo")
        refused(await c.patch(f"/api/automations/{aid}", json={"budget": {"steps": 1}}), 422)
        assert (await c.get(f"/api/automations/{aid}")).json()["result"] == "none"  # kept
        assert len((await c.get("/api/automations")).json()) == 1  # nothing half-made


async def test_another_user_cannot_see_change_or_delete_an_automation(tmp_path: Path) -> None:
    async with running_server(tmp_path, None) as srv:
        mine = (await create(srv.client)).json()
        aid = mine["id"]
        async with second_user(srv, "mallory") as other:
            assert (await other.get("/api/automations")).json() == []
            assert (await other.get(f"/api/automations/{aid}")).status_code == 404
            patched = await other.patch(f"/api/automations/{aid}", json={"approval_mode": "ask"})
            assert patched.status_code == 404
            assert (await other.delete(f"/api/automations/{aid}")).status_code == 404
            own = await create(other, name="theirs")
            assert own.status_code == 201
        after = await srv.client.get(f"/api/automations/{aid}")
        assert after.json()["approval_mode"] == "auto" and after.json()["name"] == "nightly"
        assert [a["id"] for a in (await srv.client.get("/api/automations")).json()] == [aid]


async def test_an_automation_cannot_use_another_users_secret_or_a_bad_remote(
    tmp_path: Path,
) -> None:
    async with running_server(tmp_path, None, sandbox_network="egress") as srv:
        put = await srv.client.put("/api/secrets/GH_TOKEN", json={"value": "admins-token-1"})
        assert put.status_code == 200, put.text
        repo = {"url": "https://github.com/octo/repo.git", "secret": "GH_TOKEN"}
        assert (await create(srv.client, repo=repo)).status_code == 201  # the owner's own
        async with second_user(srv, "mallory") as other:
            refused(await create(other, repo=repo), 400, "no secret named GH_TOKEN")
            local = {"url": "file:///etc"}
            assert (await create(other, repo=local)).status_code in (400, 422)
            assert (await other.get("/api/automations")).json() == []
