"""The `todo` tool (DESIGN §9): the model's checklist, journaled as `plan.updated` in every
mode, through a real server, a real sandbox pool and a scripted model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal.events import check, plan_id_of
from tests.api.harness import RunningServer, running_server

FIRST = [{"text": "read the code", "done": False}, {"text": "fix the bug", "done": False}]
SECOND = [{"text": "read the code", "done": True}, {"text": "fix the bug", "done": False}]


async def all_events(srv: RunningServer, cid: str) -> list[dict[str, Any]]:
    """Every event of the conversation, page after page."""
    events: list[dict[str, Any]] = []
    while page := await srv.events(cid, events[-1]["seq"] if events else 0):
        events += page
    return events


async def test_each_todo_call_journals_the_whole_checklist_for_the_run(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("todo", {"items": FIRST})]),
            ScriptedTurn(tool_calls=[("todo", {"items": SECOND})]),
            ScriptedTurn(text="Done."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        # read_only too: the checklist touches nothing, so no mode refuses it.
        patched = await srv.client.patch(
            f"/api/conversations/{cid}", json={"approval_mode": "read_only"}
        )
        assert patched.status_code == 200, patched.text
        run = await srv.send(cid, "fix it")
        finished = await srv.run_finished(cid, run["run_id"])
        assert finished["data"]["status"] == "completed"
        events = await all_events(srv, cid)
        updates = [e for e in events if e["type"] == "plan.updated"]
        assert [u["data"] for u in updates] == [
            {"plan_id": plan_id_of(run["run_id"]), "items": FIRST},
            {"plan_id": plan_id_of(run["run_id"]), "items": SECOND},
        ]
        for update in updates:
            check(update["type"], update["data"])
        # The model reads its list back as the tool's result.
        results = [e["data"] for e in events if e["type"] == "tool.finished"]
        assert not any(r["is_error"] for r in results)
        assert "[x] read the code" in results[1]["output"]
        assert "1/2 done" in results[1]["output"]


async def test_a_hostile_checklist_is_refused_whole_and_journals_nothing(tmp_path: Path) -> None:
    flood = {"items": [{"text": "x" * 10, "done": False}] * 10_000}
    huge_item = {"items": [{"text": "y" * 100_000, "done": False}]}
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("todo", flood)]),
            ScriptedTurn(tool_calls=[("todo", huge_item)]),
            ScriptedTurn(text="Gave up."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "flood it")
        await srv.run_finished(cid, run["run_id"])
        events = await all_events(srv, cid)
        assert not [e for e in events if e["type"] == "plan.updated"]
        results = [e["data"] for e in events if e["type"] == "tool.finished"]
        assert len(results) == 2 and all(r["is_error"] for r in results)
        assert "Invalid arguments for todo" in results[0]["output"]
        assert sum(len(r["output"]) for r in results) < 60_000  # bounded, not echoed whole
        health = await srv.client.get("/api/health")
        assert health.status_code == 200
