"""GET /api/mcp/servers: each user sees the servers of mcp.json as their own conversations
found them; nobody else's tools, status or secrets."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import log_in, running_server
from tests.mcp.conftest import WORKBENCH, write_config


async def test_servers_route_is_per_user_and_needs_a_login(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        {
            "local": {"command": sys.executable, "args": [str(WORKBENCH)], "host": True},
            "keyed": {"url": "https://mcp.example.com/mcp", "headers": {"X": "${MY_KEY}"}},
            "broken name!": {"command": "x"},
        },
    )
    provider = ScriptedProvider([ScriptedTurn(text="Hi.")])
    async with running_server(tmp_path, lambda: provider) as srv:
        async with httpx.AsyncClient(base_url=srv.base_url) as anonymous:
            refused = await anonymous.get("/api/mcp/servers")
            assert refused.status_code == 401
            assert refused.json()["error"]["code"]

        before = {s["name"]: s for s in (await srv.client.get("/api/mcp/servers")).json()}
        assert before["local"]["status"] == "not_started" and before["local"]["tools"] == []
        assert before["keyed"]["status"] == "failed" and "MY_KEY" in before["keyed"]["error"]
        assert before["broken name!"]["status"] == "invalid"

        cid = await srv.create_conversation()
        run = await srv.send(cid, "hi")
        await srv.run_finished(cid, run["run_id"])
        mine = {s["name"]: s for s in (await srv.client.get("/api/mcp/servers")).json()}
        assert mine["local"]["status"] == "connected"
        tools = {t["name"]: t for t in mine["local"]["tools"]}
        assert tools["mcp__local__wipe"]["kind"]["destructive"]
        assert tools["mcp__local__echo"]["kind"]["reads"]

        made = await srv.client.post(
            "/api/users", json={"username": "bob", "password": "bob-password-1"}
        )
        assert made.status_code == 201, made.text
        async with httpx.AsyncClient(base_url=srv.base_url) as bob:
            await log_in(bob, "bob", "bob-password-1")
            theirs = {s["name"]: s for s in (await bob.get("/api/mcp/servers")).json()}
            assert theirs["local"]["status"] == "not_started"
            assert theirs["local"]["tools"] == []


async def test_only_an_admin_replaces_mcp_json_and_never_with_a_host_server(
    tmp_path: Path,
) -> None:
    host_entry = {"command": sys.executable, "args": [str(WORKBENCH)], "host": True}
    write_config(tmp_path, {"local": host_entry})
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        current = (await srv.client.get("/api/mcp/config")).json()
        assert current == {"mcpServers": {"local": host_entry}}

        sandboxed = {"command": "python3", "args": ["-m", "server"], "env": {"K": "${K}"}}
        saved = await srv.client.put(
            "/api/mcp/config", json={"mcpServers": {"local": host_entry, "new": sandboxed}}
        )
        assert saved.status_code == 200, saved.text
        assert {s["name"] for s in saved.json()} == {"local", "new"}
        on_disk = (tmp_path / "mcp.json").read_text()
        assert '"new"' in on_disk and (tmp_path / "mcp.json").stat().st_mode & 0o777 == 0o600

        attempts = [
            {"mcpServers": {"evil": {"command": "sh", "args": ["-c", "id"], "host": True}}},
            {"mcpServers": {"local": {**host_entry, "args": ["-c", "import os"]}}},
            {"mcpServers": {"bad name!": {"command": "x"}}},
            {"mcpServers": {"both": {"command": "x", "url": "https://a"}}},
            {"mcpServers": {"big": {"command": "x", "args": ["y" * 300_000]}}},
            {"servers": {}},
        ]
        for body in attempts:
            refused = await srv.client.put("/api/mcp/config", json=body)
            assert refused.status_code in (400, 422), (body, refused.text)
            assert refused.json()["error"]["code"]
        assert (tmp_path / "mcp.json").read_text() == on_disk  # all or nothing

        made = await srv.client.post(
            "/api/users", json={"username": "bob", "password": "bob-password-1"}
        )
        assert made.status_code == 201, made.text
        async with httpx.AsyncClient(base_url=srv.base_url) as bob:
            await log_in(bob, "bob", "bob-password-1")
            for method in ("GET", "PUT"):
                response = await bob.request(
                    method, "/api/mcp/config", json={"mcpServers": {}} if method == "PUT" else None
                )
                assert response.status_code == 403
                assert response.json()["error"]["code"] == "forbidden"
        foreign = await srv.client.put(
            "/api/mcp/config", json={"mcpServers": {}}, headers={"Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        assert (tmp_path / "mcp.json").read_text() == on_disk
