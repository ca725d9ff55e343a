"""Per-run budgets through a real server: each limit stops a looping model within one step,
says which limit, and a new run (after raising the limit) carries on from there."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from burrow.config import Settings
from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, running_server

RISKY = {"command": "mkdir -p build && rm -rf build"}  # asked in the default mode


def looping(call: tuple[str, dict[str, Any]], turns: int = 40) -> ScriptedProvider:
    """A model that makes the same (successful) call again and again."""
    return ScriptedProvider([ScriptedTurn(text="Again.", tool_calls=[call]) for _ in range(turns)])


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == kind]


async def finish(srv: RunningServer, cid: str, content: str) -> dict[str, Any]:
    run = await srv.send(cid, content)
    finished: dict[str, Any] = (await srv.run_finished(cid, run["run_id"]))["data"]
    return finished


@pytest.mark.parametrize(
    ("kind", "env", "call"),
    [
        ("steps", {"BURROW_RUN_MAX_STEPS": "3"}, ("bash", {"command": "true"})),
        ("tokens", {"BURROW_RUN_MAX_TOKENS": "700"}, ("bash", {"command": "true"})),
        (
            "cost",
            {"BURROW_RUN_MAX_COST": "0.5", "BURROW_PRICE_PROMPT": "1000"},
            ("bash", {"command": "true"}),
        ),
        ("tool_seconds", {"BURROW_RUN_MAX_TOOL_SECONDS": "1"}, ("bash", {"command": "sleep 0.3"})),
    ],
)
async def test_each_budget_stops_a_looping_model_within_one_step(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    env: dict[str, str],
    call: tuple[str, dict[str, Any]],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    provider = looping(call)
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        finished = await finish(srv, cid, "loop")
        events = await srv.events(cid)

    assert finished["status"] == "budget_exceeded"
    budget = finished["budget"]
    assert budget["kind"] == kind and budget["limit"] == float(env[next(iter(env))])
    assert kind in finished["error"] and next(iter(env)) in finished["error"]
    usage = of_type(events, "usage")
    assert finished["usage"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in usage)
    # Reached, and only just: one step (model call or tool) less would be under the limit.
    assert budget["used"] >= budget["limit"]
    if kind == "steps":
        assert budget["used"] == 3 == len(provider.requests)
    elif kind == "tokens":
        last = usage[-1]["prompt_tokens"] + usage[-1]["completion_tokens"]
        assert budget["used"] - last < budget["limit"]
    elif kind == "cost":
        assert budget["used"] - usage[-1]["cost"] < budget["limit"]
    else:
        last_tool = of_type(events, "tool.finished")[-1]["duration_ms"] / 1000
        assert budget["used"] - last_tool < budget["limit"]
    # Every started call was finished with its real result before the run ended.
    results = of_type(events, "tool.finished")
    assert len(results) == len(of_type(events, "tool.started"))
    assert not any(r["is_error"] for r in results)


async def test_continue_after_the_limit_carries_on_from_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = [("write_file", {"path": f"f{i}.txt", "content": str(i)}) for i in range(5)]
    turns = [ScriptedTurn(tool_calls=[w]) for w in writes] + [ScriptedTurn(text="All done.")]

    def provider() -> ScriptedProvider:  # the turn follows the journal, whatever the run
        return ScriptedProvider(turns, turn_from_context=True)

    monkeypatch.setenv("BURROW_RUN_MAX_STEPS", "2")
    async with running_server(tmp_path, provider) as srv:
        cid = await srv.create_conversation()
        first = await finish(srv, cid, "write five files")
        assert first["status"] == "budget_exceeded"
        assert first["budget"] == {"kind": "steps", "limit": 2, "used": 2}
        # A new run has a fresh budget: two more steps, not zero.
        second = await finish(srv, cid, "continue")
        assert second["status"] == "budget_exceeded" and second["budget"]["used"] == 2

    # The operator raises the limit; "continue" then finishes the work where it stopped.
    monkeypatch.setenv("BURROW_RUN_MAX_STEPS", "10")
    seen = provider()
    async with running_server(tmp_path, lambda: seen) as srv:
        third = await finish(srv, cid, "continue")
        assert third["status"] == "completed" and "budget" not in third
        events = await srv.events(cid)
    written = [e["arguments"]["path"] for e in of_type(events, "tool.started")]
    assert written == [f"f{i}.txt" for i in range(5)]  # each file once, in order
    [request] = seen.requests[:1]
    tool_results = [m for m in request if m.role == "tool"]
    assert len(tool_results) == 4  # the model saw what the earlier runs did


async def test_time_waiting_for_an_approval_is_not_tool_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tools themselves take well under 3 s (the first one also starts the sandbox).
    monkeypatch.setenv("BURROW_RUN_MAX_TOOL_SECONDS", "3")
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", RISKY)]),
            ScriptedTurn(tool_calls=[("bash", {"command": "sleep 0.2"})]),
            ScriptedTurn(text="Done."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        sent = time.monotonic()
        run = await srv.send(cid, "clean up")
        request = await srv.wait_for(cid, lambda e: e["type"] == "approval.requested")
        await asyncio.sleep(3.5)  # the owner takes longer than the whole tool budget
        answer = await srv.client.post(
            f"/api/conversations/{cid}/approvals/{request['data']['request_id']}",
            json={"decision": "allow_once"},
        )
        assert answer.status_code == 200
        finished = (await srv.run_finished(cid, run["run_id"]))["data"]
        wall_ms = (time.monotonic() - sent) * 1000
        events = await srv.events(cid)
    assert finished["status"] == "completed", finished
    first = of_type(events, "tool.finished")[0]
    assert first["duration_ms"] >= 3500  # the call's own clock includes the wait ...
    assert len(provider.requests) == 3  # ... the budget's does not
    # Both say how long the person took, apart from the time the work took.
    assert first["approval_wait_ms"] >= 3500
    assert first["duration_ms"] - first["approval_wait_ms"] < 3000
    assert "approval_wait_ms" not in of_type(events, "tool.finished")[1]  # not asked
    assert finished["approval_wait_ms"] >= 3500
    assert 0 < finished["duration_ms"] <= wall_ms - finished["approval_wait_ms"]
    # The footer's split: the tools' wall time (sleep 0.2 and the rest, no approval wait),
    # the model's (scripted: next to nothing), the rest Burrow's; none exceeds the run.
    assert 200 <= finished["tool_ms"] < 3000, finished
    assert finished["model_ms"] < 500, finished
    assert finished["model_ms"] + finished["tool_ms"] <= finished["duration_ms"], finished


def test_max_steps_is_an_alias_of_run_max_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BURROW_MAX_STEPS", "7")
    assert Settings().run_max_steps == 7
    monkeypatch.setenv("BURROW_RUN_MAX_STEPS", "9")
    assert Settings().run_max_steps == 9


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BURROW_RUN_MAX_STEPS", "0"),
        ("BURROW_MAX_STEPS", "-3"),
        ("BURROW_RUN_MAX_TOKENS", "0"),
        ("BURROW_RUN_MAX_COST", "-1"),
        ("BURROW_RUN_MAX_COST", "inf"),
        ("BURROW_RUN_MAX_TOOL_SECONDS", "0"),
        ("BURROW_RUN_MAX_TOOL_SECONDS", "nan"),
    ],
)
def test_a_server_limit_that_would_stop_every_run_or_none_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as caught:
        Settings()
    [error] = caught.value.errors()
    # The steps limit is named by its alias (BURROW_MAX_STEPS is the older spelling).
    field = "BURROW_RUN_MAX_STEPS" if "MAX_STEPS" in name else name.lower().removeprefix("burrow_")
    assert error["loc"] == (field,)


async def test_wall_seconds_stops_a_model_that_never_stops(tmp_path: Path) -> None:
    """Each step is quick, so steps, tokens and tool time would let it go on for minutes:
    the wall clock ends it, set for the conversation (as an automation sets it)."""
    provider = ScriptedProvider(
        [ScriptedTurn(text="Again.", tool_calls=[("bash", {"command": "true"})], delay=0.05)] * 400
    )
    async with running_server(tmp_path, lambda: provider, run_max_steps=1000) as srv:
        cid = await srv.create_conversation()
        patched = await srv.client.patch(
            f"/api/conversations/{cid}", json={"budget": {"wall_seconds": 1.5}}
        )
        assert patched.status_code == 200 and patched.json()["budget"]["wall_seconds"] == 1.5
        began = time.monotonic()
        finished = await finish(srv, cid, "loop forever")
        took = time.monotonic() - began
    assert finished["status"] == "budget_exceeded"
    assert finished["budget"]["kind"] == "wall_seconds" and finished["budget"]["limit"] == 1.5
    assert 1.5 <= finished["budget"]["used"] < 4 and took < 6
    assert "wall_seconds" in finished["error"] and "set for this conversation" in finished["error"]
    assert len(provider.requests) > 2  # it did loop; the clock, not the script, ended it


def test_a_server_wall_limit_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BURROW_RUN_MAX_WALL_SECONDS", "600")
    assert Settings().run_max_wall_seconds == 600
