"""Every event a real server journals is what its payload class says, for every type.

One conversation through a real `burrow serve` (harness), a real bwrap sandbox and a real
SQLite file, with only the model scripted: a retried model call, AGENTS.md, tools with
streamed output, an approval, a preview, compaction on demand, a budget stop, a checkpoint
restored, a model change, a failed clone, an MCP server left out and a file saved from the
editor. Each stored event is then validated against its type's class: a writer that drifts
from the payload (a renamed or missing field, a wrong type) fails here.
"""

from __future__ import annotations

from pathlib import Path

from burrow.llm.base import ScriptedTurn
from burrow.llm.retry import RetryingProvider
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal import events as ev
from burrow.runs.journal.events import EventType
from tests.api.harness import running_server
from tests.mcp.conftest import write_config

RISKY = {"command": "mkdir -p build && rm -rf build"}
SERVE = {"command": "python3 -m http.server 8000", "port": 8000}


async def test_every_journaled_event_validates_against_its_payload_class(
    tmp_path: Path,
) -> None:
    scripted = ScriptedProvider(
        [
            ScriptedTurn(error="overloaded, try again", error_retryable=True),
            ScriptedTurn(thinking="Look first.", tool_calls=[("bash", {"command": "echo hi"})]),
            ScriptedTurn(tool_calls=[("bash", RISKY)]),  # asks for approval
            ScriptedTurn(tool_calls=[("preview", SERVE)]),
            ScriptedTurn(tool_calls=[("todo", {"items": [{"text": "serve", "done": True}]})]),
            ScriptedTurn(text="Done."),
            ScriptedTurn(text="SUMMARY: echoed, cleaned, served."),  # the compaction's call
            ScriptedTurn(text="Plan: nothing more."),  # a plan-mode run: plan.proposed
            ScriptedTurn(tool_calls=[("bash", {"command": "echo again"})]),  # then: budget
            ScriptedTurn(text="never asked"),
        ]
    )
    provider = RetryingProvider(scripted, base_delay=0.01)
    # An MCP server that needs a secret nobody set: an mcp.warning at the first run.
    write_config(tmp_path, {"keyed": {"url": "https://mcp.example.com", "headers": {"X": "${A}"}}})
    async with running_server(
        tmp_path, lambda: provider, preview=True, sandbox_network="egress"
    ) as srv:
        # An environment still building when the sandbox first boots: environment.build.
        defined = await srv.client.post(
            "/api/environments", json={"name": "waited", "setup": "sleep 1"}
        )
        assert defined.status_code == 201, defined.text
        # A clone from the sandbox's own loopback: refused at once, a failed import.
        created = await srv.client.post(
            "/api/conversations",
            json={"repo": {"url": "http://localhost:9/none.git"}, "environment": "waited"},
        )
        assert created.status_code == 201, created.text
        cid = created.json()["id"]
        await srv.wait_for(
            cid, lambda e: e["type"] == "workspace.import" and e["data"]["stage"] == "failed", 60
        )
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        await sandbox.write_file("AGENTS.md", b"Be brief.\n")

        run = await srv.send(cid, "echo, clean up, then serve")
        asked = await srv.wait_for(cid, lambda e: e["type"] == "approval.requested", 60)
        answer = await srv.client.post(
            f"/api/conversations/{cid}/approvals/{asked['data']['request_id']}",
            json={"decision": "allow_once"},
        )
        assert answer.status_code == 200, answer.text
        done = await srv.run_finished(cid, run["run_id"], timeout=90)
        assert done["data"]["status"] == "completed", done

        compacted = await srv.client.post(f"/api/conversations/{cid}/compact", json={})
        assert compacted.status_code == 202, compacted.text
        await srv.wait_for(cid, lambda e: e["type"] == "context.compacted", 30)

        planned = await srv.client.post(
            f"/api/conversations/{cid}/messages", json={"content": "plan", "approval_mode": "plan"}
        )
        assert planned.status_code == 202, planned.text
        proposed = await srv.wait_for(cid, lambda e: e["type"] == "plan.proposed", 30)
        plan_id = proposed["data"]["plan_id"]
        rejected = await srv.client.post(
            f"/api/conversations/{cid}/plans/{plan_id}", json={"decision": "reject"}
        )
        assert rejected.status_code == 200, rejected.text
        await srv.run_finished(cid, planned.json()["run_id"])

        limited = await srv.client.patch(f"/api/conversations/{cid}", json={"budget": {"steps": 1}})
        assert limited.status_code == 200, limited.text
        run = await srv.send(cid, "once more")
        stopped = await srv.run_finished(cid, run["run_id"], timeout=60)
        assert stopped["data"]["status"] == "budget_exceeded", stopped
        listed = await srv.client.get(f"/api/conversations/{cid}/checkpoints")
        first = listed.json()[0]["id"]
        restored = await srv.client.post(
            f"/api/conversations/{cid}/checkpoints/{first}/restore", json={}
        )
        assert restored.status_code < 300, restored.text
        saved = await srv.client.put(
            f"/api/conversations/{cid}/files/content",
            params={"path": "notes.md"},
            content=b"edited",
            headers={"Content-Type": "text/plain"},
        )
        assert saved.status_code == 200, saved.text
        changed = await srv.client.patch(f"/api/conversations/{cid}", json={"model": "demo"})
        assert changed.status_code == 200, changed.text

        events = await srv.events(cid)
        while events and not any(e["type"] == "model.changed" for e in events):
            events = await srv.events(cid)  # the PATCH journals it before answering

    problems = []
    for event in events:
        try:
            ev.check(event["type"], event["data"])
        except Exception as exc:
            problems.append(f"seq {event['seq']} {event['type']}: {exc}")
    assert not problems, "\n".join(problems)
    assert {e["type"] for e in events} == {t.value for t in EventType}
    budget = stopped["data"]["budget"]
    assert budget == {"kind": "steps", "limit": 1, "used": 1}
    retry = next(e["data"] for e in events if e["type"] == "retry")
    assert retry["attempt"] == 1 and retry["reason"] == "overloaded, try again"
