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
