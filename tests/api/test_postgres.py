"""The same server on PostgreSQL: a conversation end to end, and a restart that remembers."""

from __future__ import annotations

from pathlib import Path

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server


async def test_a_conversation_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("write_file", {"path": "pg.txt", "content": "on pg"})]),
            ScriptedTurn(text="Stored."),
        ]
    )
    async with running_server(tmp_path, lambda: provider, database_url=pg_url) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "write it")
        finished = await srv.run_finished(cid, run["run_id"])
        assert finished["data"]["status"] == "completed"
        events = await srv.events(cid)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))

    again = ScriptedProvider([ScriptedTurn(text="Still here.")])
    async with running_server(tmp_path, lambda: again, database_url=pg_url) as srv:
        run = await srv.send(cid, "and now?")
        await srv.run_finished(cid, run["run_id"])
        assert [m.content for m in again.requests[0] if m.role == "user"] == [
            "write it",
            "and now?",
        ]
        content = await srv.client.get(
            f"/api/conversations/{cid}/files/content", params={"path": "pg.txt"}
        )
        assert content.text == "on pg"
