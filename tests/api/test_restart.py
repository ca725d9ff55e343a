"""The model context is rebuilt from the journal: a restarted server remembers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import ADMIN_PASSWORD, log_in, running_server, serve_process, sse_events


async def test_second_request_after_restart_contains_the_first_exchange(tmp_path: Path) -> None:
    first = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("write_file", {"path": "a.txt", "content": "A"})]),
            ScriptedTurn(text="Wrote a.txt."),
        ]
    )
    async with running_server(tmp_path, lambda: first) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "write a.txt")
        await srv.run_finished(cid, run["run_id"])

    second = ScriptedProvider([ScriptedTurn(text="I remember.")])
    async with running_server(tmp_path, lambda: second) as srv:
        run = await srv.send(cid, "what did you do?")
        await srv.run_finished(cid, run["run_id"])
        [request] = second.requests
        seen = [(m.role, m.content) for m in request if m.role != "system"]
        assert seen[0] == ("user", "write a.txt")
        assert seen[1][0] == "assistant" and request[2].tool_calls[0].name == "write_file"
        assert seen[2][0] == "tool"
        assert seen[3] == ("assistant", "Wrote a.txt.")
        assert seen[4] == ("user", "what did you do?")
        # The file written before the restart is still there.
        content = await srv.client.get(
            f"/api/conversations/{cid}/files/content", params={"path": "a.txt"}
        )
        assert content.text == "A"


async def test_a_run_cut_off_by_a_killed_server_is_repaired_on_start(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps([{"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]}])
    )
    with serve_process(tmp_path, f"scripted:{script}") as (server, base):
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            await client.post(f"/api/conversations/{cid}/messages", json={"content": "sleep"})
            async with asyncio.timeout(20):
                async for event in sse_events(client, cid):
                    if event["type"] == "tool.started":
                        break
        server.kill()  # SIGKILL: no shutdown code runs
        server.wait()

    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        events = await srv.events(cid)
        assert events[-1]["type"] == "run.finished"
        assert events[-1]["data"]["status"] == "failed"
        assert "restarted" in events[-1]["data"]["error"]
        # A full usage object (the web UI shows it), summing the run's usage events so far.
        spent = [e["data"] for e in events if e["type"] == "usage"]
        assert spent and events[-1]["data"]["usage"] == {
            name: sum(u.get(name, 0) for u in spent)
            for name in {"prompt_tokens", "completion_tokens", "cost"}.union(*spent)
        }
        started = [e["data"]["call_id"] for e in events if e["type"] == "tool.started"]
        finished = [e["data"]["call_id"] for e in events if e["type"] == "tool.finished"]
        assert started == finished
        assert (await srv.client.get(f"/api/conversations/{cid}")).json()["status"] == "idle"
