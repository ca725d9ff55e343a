"""The loop guard through a real server: the same failing call three times in a row is
pointed out to the model (in its next request), five times ends the run as failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server

MISSING = ("read_file", {"path": "missing.txt"})  # fails: no such file
OTHER = ("read_file", {"path": "also-missing.txt"})
NOTE = "[Burrow] This exact call"


async def test_repeated_failing_call_is_told_then_stopped(tmp_path: Path) -> None:
    calls: list[tuple[str, dict[str, Any] | str]] = [
        MISSING,
        MISSING,
        OTHER,  # a different call: the count starts again
        MISSING,
        MISSING,
        MISSING,  # third in a row: told
        MISSING,  # fourth: told again
        MISSING,  # fifth: the run ends
        ("bash", {"command": "true"}),  # never asked for
    ]
    provider = ScriptedProvider([ScriptedTurn(tool_calls=[c]) for c in calls])
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "read it")
        finished = (await srv.run_finished(cid, run["run_id"]))["data"]
        events = await srv.events(cid)

    results = [e["data"] for e in events if e["type"] == "tool.finished"]
    started = [e["data"] for e in events if e["type"] == "tool.started"]
    read_only = {"reads": True, "writes": False, "destructive": False, "network": False}
    assert started[0]["kind"] == {**read_only, "shell": False}  # the UI's flags, declared
    assert len(results) == 8 and all(r["is_error"] for r in results)
    told = [NOTE in r["output"] for r in results]
    assert told == [False, False, False, False, False, True, True, False]
    assert "3 times in a row" in results[5]["output"]
    assert results[5]["output"].startswith("File not found: missing.txt")
    # The model reads the note in its very next request.
    last_seen = [m for m in provider.requests[6] if m.role == "tool"][-1]
    assert NOTE in last_seen.content and "3 times in a row" in last_seen.content

    assert finished["status"] == "failed"
    assert "same failing call was made 5 times in a row" in finished["error"]
    assert "missing.txt" in finished["error"] and "budget" not in finished
    assert len(provider.requests) == 8  # nothing after the fifth
