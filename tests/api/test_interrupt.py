"""Interrupt: during a tool and during a model stream, the run ends canceled and pairs
every tool call; the conversation keeps working afterwards."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.sandbox.backend import ExecChunk, ExecRequest
from tests.api.harness import RunningServer, running_server


def assert_paired(events: list[dict[str, Any]]) -> None:
    started = [e["data"]["call_id"] for e in events if e["type"] == "tool.started"]
    finished = [e["data"]["call_id"] for e in events if e["type"] == "tool.finished"]
    assert sorted(started) == sorted(finished)
    runs = [e["run_id"] for e in events if e["type"] == "run.started"]
    ends = [e["run_id"] for e in events if e["type"] == "run.finished"]
    assert sorted(runs) == sorted(ends)


async def _interrupt(srv: RunningServer, cid: str) -> None:
    response = await srv.client.post(f"/api/conversations/{cid}/interrupt", json={})
    assert response.status_code == 202


async def test_interrupt_during_a_long_sleep(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": "echo sleeping; sleep 30"})]),
            ScriptedTurn(text="Back again."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "sleep")
        await srv.wait_for(cid, lambda e: e["type"] == "tool.output")  # the sleep is running
        began = time.monotonic()
        await _interrupt(srv, cid)
        finished = await srv.run_finished(cid, run["run_id"], timeout=10)
        assert time.monotonic() - began < 5
        assert finished["data"]["status"] == "canceled"
        events = await srv.events(cid)
        assert_paired(events)
        [tool_end] = [e for e in events if e["type"] == "tool.finished"]
        assert tool_end["data"]["is_error"] and "Interrupted" in tool_end["data"]["output"]
        # The sleep is really gone from the sandbox.
        sandbox = srv.services.runtime.sandboxes.running(cid)
        assert sandbox is not None
        ps = b""
        async for item in sandbox.exec(ExecRequest(argv=["ps", "-eo", "args"])):
            if isinstance(item, ExecChunk):
                ps += item.data
        assert b"sleep 30" not in ps, ps.decode()

        again = await srv.send(cid, "are you there?")
        assert again["run_id"] != run["run_id"]
        done = await srv.run_finished(cid, again["run_id"])
        assert done["data"]["status"] == "completed"
        assert_paired(await srv.events(cid))


async def test_interrupt_during_a_model_stream(tmp_path: Path) -> None:
    words = " ".join(f"word{i}" for i in range(400))
    provider = ScriptedProvider(
        [ScriptedTurn(text=words, delay=0.02), ScriptedTurn(text="Short answer.")]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "talk")
        await srv.wait_for(cid, lambda e: e["type"] == "assistant.text.delta")
        await _interrupt(srv, cid)
        finished = await srv.run_finished(cid, run["run_id"], timeout=10)
        assert finished["data"]["status"] == "canceled"
        events = await srv.events(cid)
        streamed = "".join(e["data"]["text"] for e in events if e["type"] == "assistant.text.delta")
        assert 0 < len(streamed) < len(words)
        # What was shown is kept as the (partial) assistant message.
        [partial] = [e for e in events if e["type"] == "assistant.message"]
        assert partial["data"]["content"] == streamed

        again = await srv.send(cid, "short please")
        assert (await srv.run_finished(cid, again["run_id"]))["data"]["status"] == "completed"
        # The next model request still has the partial answer in its context.
        assert any(m.role == "assistant" and m.content == streamed for m in provider.requests[1])


async def test_interrupt_without_a_run_is_accepted(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        cid = await srv.create_conversation()
        response = await srv.client.post(f"/api/conversations/{cid}/interrupt", json={})
        assert response.status_code == 202
        assert response.json()["run_id"] is None


async def test_stop_drops_queued_steering_and_the_next_message_starts_a_new_run(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": "echo busy; sleep 30"})]),
            ScriptedTurn(text="A fresh answer."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "work")
        await srv.wait_for(cid, lambda e: e["type"] == "tool.output")
        steer = await srv.send(cid, "also do this")
        assert steer["run_id"] == run["run_id"]
        await _interrupt(srv, cid)
        await srv.run_finished(cid, run["run_id"])
        assert srv.services.runtime.active_run(cid) is None  # the steering is not answered
        assert len(provider.requests) == 1

        after = await srv.send(cid, "now this instead")
        assert after["run_id"] != run["run_id"]
        assert (await srv.run_finished(cid, after["run_id"]))["data"]["status"] == "completed"
        users = [m.content for m in provider.requests[1] if m.role == "user"]
        assert users == ["work", "also do this", "now this instead"]
        assert_paired(await srv.events(cid))
