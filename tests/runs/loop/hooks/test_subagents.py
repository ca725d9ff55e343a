"""Subagents through a real server and sandbox: the `task` tool's sub-loops run at once,
their events nest under the parent's call, their tokens stop the parent at its budget, and
the parent's context holds only their reports."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal.events import check
from tests.api.harness import RunningServer, running_server

RISKY = {"command": "mkdir -p build && rm -rf build"}  # asked in the default mode


def task(key: str) -> tuple[str, dict[str, Any]]:
    return ("task", {"description": f"do {key}", "prompt": f"{key}: write a file and report"})


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def finish(srv: RunningServer, cid: str, content: str) -> dict[str, Any]:
    run = await srv.send(cid, content)
    finished: dict[str, Any] = (await srv.run_finished(cid, run["run_id"]))["data"]
    return finished


def two_workers(then: list[ScriptedTurn] | None = None) -> ScriptedProvider:
    """A parent that hands out two tasks at once; each subagent sleeps in bash, writes a
    file, and reports."""
    return ScriptedProvider(
        [ScriptedTurn(text="Splitting.", tool_calls=[task("Task A"), task("Task B")])]
        + (then if then is not None else [ScriptedTurn(text="Both done.")]),
        subagents={
            key: [
                ScriptedTurn(
                    text=f"{key} working.",
                    tool_calls=[("bash", {"command": f"sleep 0.6; echo {key} > {key[-1]}.txt"})],
                ),
                ScriptedTurn(text=f"Report of {key}: wrote {key[-1]}.txt."),
            ]
            for key in ("Task A", "Task B")
        },
    )


async def test_two_subagents_run_at_once_and_nest_under_their_calls(tmp_path: Path) -> None:
    provider = two_workers()
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        await sandbox.write_file("AGENTS.md", b"Always answer in haiku.")
        finished = await finish(srv, cid, "split the work")
        events = await srv.events(cid)
        listing = await srv.client.get(f"/api/conversations/{cid}/files", params={"path": "."})

    assert finished["status"] == "completed", finished
    for event in events:  # every payload, nested ones too, is of its declared shape
        check(event["type"], event["data"])
    parent_calls = [
        e["data"] for e in of_type(events, "tool.started") if "parent_call_id" not in e["data"]
    ]
    assert [c["name"] for c in parent_calls] == ["task", "task"]
    ids = {c["arguments"]["prompt"][:6]: c["call_id"] for c in parent_calls}
    nested = [e for e in events if "parent_call_id" in e["data"]]
    assert {e["data"]["parent_call_id"] for e in nested} == set(ids.values())
    for key, call_id in ids.items():
        mine = [e for e in nested if e["data"]["parent_call_id"] == call_id]
        kinds = [e["type"] for e in mine]
        # A subagent writes its own answer, usage and tool events, no run of its own.
        assert "run.started" not in kinds and "run.finished" not in kinds
        assert kinds.count("tool.started") == kinds.count("tool.finished") == 1
        assert kinds.count("usage") == 2 and kinds.count("assistant.message") == 2
        text = "".join(e["data"]["text"] for e in mine if e["type"] == "assistant.text.delta")
        assert key in text
        assert all(e["run_id"] == finished_run(events) for e in mine)
        result = next(
            e["data"] for e in of_type(events, "tool.finished") if e["data"]["call_id"] == call_id
        )
        assert result["output"] == f"Report of {key}: wrote {key[-1]}.txt."
        assert not result["is_error"]
    # At once: both subagents' bash calls started before either finished.
    order = [e["type"] for e in nested if e["type"] in ("tool.started", "tool.finished")]
    assert order == ["tool.started", "tool.started", "tool.finished", "tool.finished"]
    # The same sandbox: both files are in the parent's workspace.
    names = {entry["name"] for entry in listing.json()}
    assert {"A.txt", "B.txt"} <= names
    # The parent's next request holds the two reports, none of the subagents' turns.
    parent_requests = [r for r in provider.requests if r[1].content == "split the work"]
    assert len(parent_requests) == 2
    after = parent_requests[1]
    assert [m.role for m in after] == ["system", "user", "assistant", "tool", "tool"]
    assert " working." not in " ".join(m.content for m in after)
    # A subagent is not offered `task` (no subagents of subagents); the parent is.
    offered = [
        {spec.name for spec in tools}
        for request, tools in zip(provider.requests, provider.tool_requests, strict=True)
    ]
    for request, names_offered in zip(provider.requests, offered, strict=True):
        is_sub = request[1].content.startswith("Task ")
        assert ("task" in names_offered) is not is_sub
        assert "skill" not in names_offered  # no skills here: nothing to load
        # Each gets the project's instructions; a subagent is told it is one.
        assert "Always answer in haiku." in request[0].content
        assert ("You are a subagent" in request[0].content) is is_sub
    # The run's usage counts the subagents' tokens.
    usage = [e["data"] for e in of_type(events, "usage")]
    assert len(usage) == 6
    assert finished["usage"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in usage)


def finished_run(events: list[dict[str, Any]]) -> str:
    run_id: str = of_type(events, "run.finished")[-1]["run_id"]
    return run_id


async def test_subagents_tokens_stop_the_parent_at_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BURROW_RUN_MAX_TOKENS", "1500")
    looping = [ScriptedTurn(text="Again.", tool_calls=[("bash", {"command": "true"})])] * 60
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=[task("Task A"), task("Task B")])] * 5,
        subagents={"Task A": looping, "Task B": looping},
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        finished = await finish(srv, cid, "loop in two subagents")
        events = await srv.events(cid)

    assert finished["status"] == "budget_exceeded", finished
    assert finished["budget"]["kind"] == "tokens"
    usage = [e["data"] for e in of_type(events, "usage")]
    spent = sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage)
    assert finished["budget"]["used"] == spent >= 1500
    # The subagents spent it: the parent made one model call.
    parent_usage = [u for u in usage if "parent_call_id" not in u]
    assert len(parent_usage) == 1 and len(usage) > 4
    # Both subagents stopped, their calls were answered as errors, and every call is paired.
    tasks = [
        e["data"] for e in of_type(events, "tool.finished") if "parent_call_id" not in e["data"]
    ]
    assert len(tasks) == 2 and all(t["is_error"] for t in tasks)
    assert all("budget" in t["output"] for t in tasks)
    assert len(of_type(events, "tool.started")) == len(of_type(events, "tool.finished"))
    assert len(of_type(events, "run.finished")) == 1


async def test_a_run_starts_at_most_the_configured_subagents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BURROW_RUN_MAX_SUBAGENTS", "1")
    provider = two_workers()
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        finished = await finish(srv, cid, "split the work")
        events = await srv.events(cid)

    assert finished["status"] == "completed"
    tasks = [
        e["data"] for e in of_type(events, "tool.finished") if "parent_call_id" not in e["data"]
    ]
    assert [t["is_error"] for t in tasks].count(True) == 1
    refused = next(t for t in tasks if t["is_error"])
    assert "BURROW_RUN_MAX_SUBAGENTS" in refused["output"]


async def test_a_subagents_call_asks_the_owner_and_stop_closes_everything(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=[task("Task A")])],
        subagents={"Task A": [ScriptedTurn(tool_calls=[("bash", RISKY)])]},
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "risky work")
        asked = await srv.wait_for(cid, lambda e: e["type"] == "approval.requested")
        assert "parent_call_id" in asked["data"]
        status = (await srv.client.get(f"/api/conversations/{cid}")).json()["status"]
        assert status == "waiting_approval"
        response = await srv.client.post(f"/api/conversations/{cid}/interrupt", json={})
        assert response.status_code == 202
        finished = (await srv.run_finished(cid, run["run_id"]))["data"]
        events = await srv.events(cid)
        await asyncio.sleep(0)

    assert finished["status"] == "canceled"
    resolved = of_type(events, "approval.resolved")
    assert [r["data"]["decision"] for r in resolved] == ["deny"]
    assert len(of_type(events, "tool.started")) == len(of_type(events, "tool.finished")) == 2
    assert len(of_type(events, "run.finished")) == 1


async def test_a_long_report_is_cut_before_it_reaches_the_parents_context(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=[task("Task A")]), ScriptedTurn(text="Read it.")],
        subagents={"Task A": [ScriptedTurn(text="word " * 20_000)]},
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        finished = await finish(srv, cid, "report at length")
        events = await srv.events(cid)

    assert finished["status"] == "completed"
    [result] = [e["data"] for e in of_type(events, "tool.finished")]
    assert result["truncated"] and "the report was cut at 16000 characters" in result["output"]
    assert len(result["output"]) < 16_100
    assert len(provider.requests[-1][-1].content) < 16_100  # what the parent's model read
