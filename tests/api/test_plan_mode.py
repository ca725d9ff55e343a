"""Plan mode (DESIGN §9) through a real server, real sandboxes and a scripted model: the run
only reads (the approval policy refuses writes, the sandbox's read-only wall stops what the
rating lets through), ends its first part with `plan.proposed`, and waits; Approve goes on
in the chosen mode with the plan in context, Reject ends the run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal.events import check, plan_id_of
from burrow.sandbox.local import LocalBackend
from tests.api.harness import (
    ADMIN_PASSWORD,
    RunningServer,
    log_in,
    running_server,
    serve_process,
    sse_events,
)

PLAN = [{"text": "look at f", "done": False}, {"text": "write g", "done": False}]
EDITED = [{"text": "look at f", "done": True}, {"text": "write h instead", "done": False}]
# Rated safe, so the policy lets it run: the sandbox's wall is what stops it.
SNEAKY = "sort -o sneaky.txt f"


async def all_events(srv: RunningServer, cid: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while page := await srv.events(cid, events[-1]["seq"] if events else 0):
        events += page
    return events


async def decide(srv: RunningServer, cid: str, plan_id: str, **body: Any) -> httpx.Response:
    return await srv.client.post(f"/api/conversations/{cid}/plans/{plan_id}", json=body)


async def test_a_plan_mode_run_cannot_write_proposes_and_goes_on_when_approved(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("todo", {"items": PLAN})]),
            ScriptedTurn(tool_calls=[("write_file", {"path": "g", "content": "x"})]),
            ScriptedTurn(tool_calls=[("bash", {"command": "echo x > g"})]),
            ScriptedTurn(tool_calls=[("bash", {"command": SNEAKY})]),
            ScriptedTurn(tool_calls=[("bash", {"command": "cat f"})]),
            ScriptedTurn(text="Here is my plan."),
            # After approval, in auto mode:
            ScriptedTurn(tool_calls=[("write_file", {"path": "h", "content": "done\n"})]),
            ScriptedTurn(text="Done."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        await sandbox.write_file("f", b"content of f\n")
        patched = await srv.client.patch(
            f"/api/conversations/{cid}", json={"approval_mode": "plan"}
        )
        assert patched.status_code == 200, patched.text
        assert patched.json()["approval_mode"] == "plan"
        run = await srv.send(cid, "plan it")
        plan_id = plan_id_of(run["run_id"])
        proposed = await srv.wait_for(cid, lambda e: e["type"] == "plan.proposed")
        assert proposed["data"] == {"plan_id": plan_id, "items": PLAN}
        check("plan.proposed", proposed["data"])

        backend = srv.services.runtime.sandboxes.backend
        assert isinstance(backend, LocalBackend)
        workspace = backend.workspace_dir(cid)
        assert not (workspace / "g").exists() and not (workspace / "sneaky.txt").exists()
        results = [e["data"] for e in await all_events(srv, cid) if e["type"] == "tool.finished"]
        write, echo, sneaky, cat = results[1:]
        assert write["is_error"] and "plan mode" in write["output"]
        assert echo["is_error"] and "plan mode" in echo["output"]
        assert sneaky["is_error"] and "plan mode" not in sneaky["output"]  # the wall's refusal
        assert not cat["is_error"] and "content of f" in cat["output"]

        # Still waiting: the run has not finished.
        assert not [e for e in await all_events(srv, cid) if e["type"] == "run.finished"]
        bad = await decide(srv, cid, plan_id, decision="maybe")
        assert bad.status_code == 422, bad.text
        bad_mode = await decide(srv, cid, plan_id, decision="approve", mode="plan")
        assert bad_mode.status_code == 422, bad_mode.text
        assert (await decide(srv, cid, "p_nope", decision="approve")).status_code == 404

        approved = await decide(srv, cid, plan_id, decision="approve", items=EDITED, mode="auto")
        assert approved.status_code == 200, approved.text
        assert approved.json() == {"plan_id": plan_id, "decision": "approve"}
        finished = await srv.run_finished(cid, run["run_id"])
        assert finished["data"]["status"] == "completed", finished
        assert (workspace / "h").read_text() == "done\n"  # auto mode now: it writes

        again = await decide(srv, cid, plan_id, decision="approve")
        assert again.status_code == 409 and again.json()["error"]["code"] == "plan_decided"
        events = await all_events(srv, cid)
        # The edited plan is journaled and given to the model in the same run.
        updates = [e["data"]["items"] for e in events if e["type"] == "plan.updated"]
        assert updates[-1] == EDITED
        assert len({e["run_id"] for e in events if e["run_id"]}) == 1
        told = provider.requests[6][-1]
        assert told.role == "user" and "write h instead" in str(told.content)
        # The conversation stays in plan mode; only the run went on in auto.
        shown = await srv.client.get(f"/api/conversations/{cid}")
        assert shown.json()["approval_mode"] == "plan"


async def test_a_message_in_plan_mode_rejected_ends_its_run_and_only_the_owner_decides(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("todo", {"items": PLAN})]),
            ScriptedTurn(text="Plan ready."),
            ScriptedTurn(tool_calls=[("write_file", {"path": "g", "content": "x"})]),
            ScriptedTurn(text="Wrote g."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        sent = await srv.client.post(
            f"/api/conversations/{cid}/messages", json={"content": "plan", "approval_mode": "plan"}
        )
        assert sent.status_code == 202, sent.text
        run_id = sent.json()["run_id"]
        plan_id = plan_id_of(run_id)
        await srv.wait_for(cid, lambda e: e["type"] == "plan.proposed")

        made = await srv.client.post("/api/users", json={"username": "eve", "password": "eve-pw-1"})
        assert made.status_code == 201, made.text
        async with httpx.AsyncClient(base_url=srv.base_url) as eve:
            await log_in(eve, "eve", "eve-pw-1")
            url = f"/api/conversations/{cid}/plans/{plan_id}"
            answer = await eve.post(url, json={"decision": "approve", "mode": "auto"})
            assert answer.status_code == 404, answer.text
            flood = {"decision": "approve", "items": [{"text": "x", "done": False}] * 10_000}
            assert (await srv.client.post(url, json=flood)).status_code == 422
            huge = {"decision": "approve", "items": [{"text": "y" * 100_000}]}
            assert (await srv.client.post(url, json=huge)).status_code == 422

        rejected = await decide(srv, cid, plan_id, decision="reject")
        assert rejected.status_code == 200, rejected.text
        finished = await srv.run_finished(cid, run_id)
        assert finished["data"]["status"] == "completed"
        assert len(provider.requests) == 2  # rejected: the model is not asked again
        # The conversation's own mode (ask) is back for the next message's run.
        run = await srv.send(cid, "now write")
        done = await srv.run_finished(cid, run["run_id"])
        assert done["data"]["status"] == "completed"
        results = [e["data"] for e in await all_events(srv, cid) if e["type"] == "tool.finished"]
        assert not results[-1]["is_error"], results[-1]


async def test_stopping_a_waiting_plan_ends_the_run_and_the_plan(tmp_path: Path) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Plan: nothing to do.")])
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        await srv.client.patch(f"/api/conversations/{cid}", json={"approval_mode": "plan"})
        run = await srv.send(cid, "plan")
        proposed = await srv.wait_for(cid, lambda e: e["type"] == "plan.proposed")
        assert proposed["data"]["items"] == []  # no checklist kept: the answer is the plan
        stopped = await srv.client.post(f"/api/conversations/{cid}/interrupt", json={})
        assert stopped.status_code == 202
        finished = await srv.run_finished(cid, run["run_id"])
        assert finished["data"]["status"] == "canceled"
        await asyncio.sleep(0)
        late = await decide(srv, cid, plan_id_of(run["run_id"]), decision="approve")
        assert late.status_code == 409


async def test_a_plan_waiting_when_the_server_dies_is_closed_on_start(tmp_path: Path) -> None:
    """Like a pending approval: the restarted server repairs the run; deciding is 409."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Plan: look, then write."}]))
    with serve_process(tmp_path, f"scripted:{script}") as (server, base):
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            sent = await client.post(
                f"/api/conversations/{cid}/messages", json={"content": "p", "approval_mode": "plan"}
            )
            run_id = sent.json()["run_id"]
            async with asyncio.timeout(20):
                async for event in sse_events(client, cid):
                    if event["type"] == "plan.proposed":
                        break
        server.kill()  # SIGKILL: no shutdown code runs
        server.wait()

    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        events = await all_events(srv, cid)
        assert events[-1]["type"] == "run.finished" and events[-1]["run_id"] == run_id
        assert "restarted" in events[-1]["data"]["error"]
        late = await decide(srv, cid, plan_id_of(run_id), decision="approve")
        assert late.status_code == 409, late.text
