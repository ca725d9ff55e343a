"""OpenWork: what a journal left open, and the events that close it (run end and recovery)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from burrow.runs.journal import events as ev
from burrow.runs.journal.closing import OpenWork
from burrow.runs.journal.journal import Journal
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.events import EventStore
from burrow.store.migrate import open_database


async def test_open_calls_approvals_and_runs_are_closed_once(tmp_path: Path) -> None:
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    user = await AccountStore(db).get_or_create("alice")
    cid = (await ConversationStore(db).create(user.id, "t")).id
    journal = Journal(EventStore(db))
    started = [
        ev.make(ev.RunStarted(run_id="r1"), "r1"),
        ev.make(ev.ToolStarted(call_id="done", name="bash", arguments={}), "r1"),
        ev.make(ev.ToolFinished(call_id="done", output="ok", is_error=False), "r1"),
        ev.make(ev.ToolStarted(call_id="open", name="bash", arguments={}), "r1"),
        ev.make(
            ev.ApprovalRequested(
                request_id="ap1", call_id="open", tool="bash", arguments={}, risk="safe", reason=""
            ),
            "r1",
        ),
    ]
    await journal.append(cid, *started)

    recovered = OpenWork()
    for event in await journal.read(cid):
        recovered.apply(event)
    as_written = OpenWork()  # a run follows the same events as it writes them
    for new in started:
        as_written.apply(new)
    assert list(recovered.runs) == list(as_written.runs) == ["r1"]

    for work, timed in ((recovered, False), (as_written, True)):
        closing = work.closing("Run ended: test", timed=timed)
        assert [(e.type, e.run_id) for e in closing] == [
            ("approval.resolved", "r1"),
            ("tool.finished", "r1"),
        ]
        assert closing[0].data == {"request_id": "ap1", "decision": "deny"}
        assert closing[1].data["call_id"] == "open" and closing[1].data["is_error"]
        assert closing[1].data["output"] == "Run ended: test"
        assert work.closing("again", timed=timed) == []  # each is closed once
    await db.close()


def test_a_subagents_open_call_and_approval_are_closed_as_the_subagents() -> None:
    work = OpenWork()
    for event in (
        ev.make(ev.RunStarted(run_id="r1"), "r1"),
        ev.make(ev.ToolStarted(call_id="task1", name="task", arguments={}), "r1"),
        ev.nested(ev.make(ev.ToolStarted(call_id="n1", name="bash", arguments={}), "r1"), "task1"),
        ev.nested(
            ev.make(
                ev.ApprovalRequested(
                    request_id="ap1",
                    call_id="n1",
                    tool="bash",
                    arguments={},
                    risk="safe",
                    reason="",
                ),
                "r1",
            ),
            "task1",
        ),
    ):
        work.apply(event)
    closing = {
        (e.type, e.data.get("call_id") or e.data.get("request_id")): e
        for e in work.closing("gone", timed=False)
    }
    assert closing[("tool.finished", "n1")].data["parent_call_id"] == "task1"
    assert closing[("approval.resolved", "ap1")].data["parent_call_id"] == "task1"
    assert "parent_call_id" not in closing[("tool.finished", "task1")].data
    for event in closing.values():
        ev.check(event.type, event.data)


async def test_a_call_cut_off_by_a_crash_reports_how_long_it_streamed(tmp_path: Path) -> None:
    """Recovery cannot know when the server died, but the call ran at least until its last
    committed output: its card says so, not "0 ms"."""
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    user = await AccountStore(db).get_or_create("alice")
    cid = (await ConversationStore(db).create(user.id, "t")).id
    journal = Journal(EventStore(db))
    await journal.append(cid, ev.make(ev.RunStarted(run_id="r1"), "r1"))
    await journal.append(cid, ev.make(ev.ToolStarted(call_id="c", name="bash", arguments={}), "r1"))
    await journal.append(cid, ev.make(ev.ToolStarted(call_id="q", name="bash", arguments={}), "r1"))
    await asyncio.sleep(0.3)
    output = ev.ToolOutput(call_id="c", stream="stdout", text="working\n")
    await journal.append(cid, ev.make(output, "r1"))
    await asyncio.sleep(0.3)  # the server dies some time after the last output

    recovered = OpenWork()
    for event in await journal.read(cid):
        recovered.apply(event)
    finished = {e.data["call_id"]: e.data for e in recovered.closing("gone", timed=False)}
    assert 300 <= finished["c"]["duration_ms"] < 600, finished
    assert finished["q"]["duration_ms"] < 100  # no output: nothing says it ran at all
    await db.close()
