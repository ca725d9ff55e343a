"""A conversation's own model and budget, through a real server and the fake OpenAI server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.api.harness import RunningServer, running_server
from tests.fakes import FakeOpenAIServer, text_reply, tool_call_reply

KEY = "sk-fake-0123456789"


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@contextlib.asynccontextmanager
async def serve(
    tmp_path: Path, fake: FakeOpenAIServer, **settings: Any
) -> AsyncIterator[RunningServer]:
    """A server whose model is `fake-model` at the fake server (set as the settings page does)."""
    async with running_server(tmp_path, None, **settings) as srv:
        response = await srv.client.put(
            "/api/settings/model",
            json={"model": "fake-model", "base_url": fake.base_url, "api_key": KEY},
        )
        assert response.status_code == 200, response.text
        yield srv


async def finish(srv: RunningServer, cid: str, content: str) -> dict[str, Any]:
    run = await srv.send(cid, content)
    finished: dict[str, Any] = (await srv.run_finished(cid, run["run_id"]))["data"]
    return finished


async def test_created_with_a_model_the_runs_use_it(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    async with serve(tmp_path, fake) as srv:
        response = await srv.client.post(
            "/api/conversations", json={"model": "gpt-4o", "approval_mode": "auto"}
        )
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["model"] == "gpt-4o" and body["approval_mode"] == "auto"
        fake.enqueue(text_reply("hello"))
        assert (await finish(srv, body["id"], "hi"))["status"] == "completed"
        assert fake.requests[-1]["model"] == "gpt-4o"
        plain = await srv.create_conversation()
        fake.enqueue(text_reply("hello"))
        await finish(srv, plain, "hi")
        assert fake.requests[-1]["model"] == "fake-model"  # no model chosen: the server's


async def test_patching_the_model_journals_it_and_the_next_run_uses_it(
    tmp_path: Path, fake: FakeOpenAIServer
) -> None:
    async with serve(tmp_path, fake) as srv:
        cid = await srv.create_conversation()
        fake.enqueue(text_reply("one"))
        await finish(srv, cid, "first")
        response = await srv.client.patch(f"/api/conversations/{cid}", json={"model": "other"})
        assert response.status_code == 200, response.text
        assert response.json()["model"] == "other"
        fake.enqueue(text_reply("two"))
        await finish(srv, cid, "second")
        assert [r["model"] for r in fake.requests] == ["fake-model", "other"]
        changed = [e for e in await srv.events(cid) if e["type"] == "model.changed"]
        assert [e["data"] for e in changed] == [{"model": "other"}]
        # Unchanged: nothing journaled. Empty: back to the server's model.
        await srv.client.patch(f"/api/conversations/{cid}", json={"model": "other"})
        response = await srv.client.patch(f"/api/conversations/{cid}", json={"model": ""})
        assert response.json()["model"] is None
        changed = [e["data"] for e in await srv.events(cid) if e["type"] == "model.changed"]
        assert changed == [{"model": "other"}, {"model": "fake-model"}]


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("anthropic:", "No model name after anthropic"),
        ("scripted:/etc/passwd", "cannot choose a scripted model"),
    ],
)
async def test_a_model_the_server_cannot_build_is_a_400_saying_why(
    tmp_path: Path, fake: FakeOpenAIServer, model: str, says: str
) -> None:
    async with serve(tmp_path, fake) as srv:
        cid = await srv.create_conversation()
        for response in (
            await srv.client.patch(f"/api/conversations/{cid}", json={"model": model}),
            await srv.client.post("/api/conversations", json={"model": model}),
        ):
            assert response.status_code == 400, response.text
            error = response.json()["error"]
            assert error["code"] == "invalid_model" and says in error["message"]
        assert (await srv.client.get(f"/api/conversations/{cid}")).json()["model"] is None


async def test_total_cost_stops_the_conversation_until_raised(
    tmp_path: Path, fake: FakeOpenAIServer
) -> None:
    # $0.1 per prompt token: each answer (12 prompt tokens) costs $1.20.
    async with serve(tmp_path, fake, price_prompt=100_000.0) as srv:
        cid = await srv.create_conversation()
        response = await srv.client.patch(
            f"/api/conversations/{cid}", json={"budget": {"total_cost": 2.0, "steps": 10}}
        )
        assert response.json()["budget"] == {
            "tokens": None,
            "cost": None,
            "steps": 10,
            "tool_seconds": None,
            "wall_seconds": None,
            "total_cost": 2.0,
        }
        fake.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))
        assert (await finish(srv, cid, "a"))["status"] == "completed"  # $1.20 spent
        assert (await finish(srv, cid, "b"))["status"] == "completed"  # $2.40 spent
        stopped = await finish(srv, cid, "c")
        assert stopped["status"] == "budget_exceeded"
        assert stopped["budget"] == {"kind": "total_cost", "limit": 2.0, "used": 2.4}
        assert "Raise budget.total_cost" in stopped["error"]
        assert len(fake.requests) == 2  # the model was not asked again
        assert (await finish(srv, cid, "continue"))["status"] == "budget_exceeded"
        # Raising it (only that field: steps stays) and saying "continue" resumes.
        response = await srv.client.patch(
            f"/api/conversations/{cid}", json={"budget": {"total_cost": 10.0}}
        )
        assert response.json()["budget"]["steps"] == 10
        assert (await finish(srv, cid, "continue"))["status"] == "completed"
        assert fake.requests[-1]["messages"][-1]["content"] == "continue"


async def test_a_budget_patched_mid_run_applies_at_the_next_check(
    tmp_path: Path, fake: FakeOpenAIServer
) -> None:
    async with serve(tmp_path, fake) as srv:
        cid = await srv.create_conversation()
        slow = replace(tool_call_reply([("read_file", {"path": "missing.txt"})]), delay=1.0)
        fake.enqueue(slow, text_reply("done"))
        run = await srv.send(cid, "read it")
        await asyncio.sleep(0.3)  # the model is still answering its first call
        response = await srv.client.patch(
            f"/api/conversations/{cid}", json={"budget": {"steps": 1}}
        )
        assert response.status_code == 200
        finished = (await srv.run_finished(cid, run["run_id"]))["data"]
        assert finished["status"] == "budget_exceeded"
        assert finished["budget"] == {"kind": "steps", "limit": 1, "used": 1}
        assert "set for this conversation" in finished["error"]
        assert len(fake.requests) == 1
        # Lifted again (null: the server's 50 steps), "continue" answers.
        await srv.client.patch(f"/api/conversations/{cid}", json={"budget": {"steps": None}})
        assert (await finish(srv, cid, "continue"))["status"] == "completed"


async def test_per_run_limits_of_the_conversation_override_the_servers(
    tmp_path: Path, fake: FakeOpenAIServer
) -> None:
    async with serve(tmp_path, fake, run_max_tokens=1_000_000) as srv:
        cid = await srv.create_conversation()
        await srv.client.patch(f"/api/conversations/{cid}", json={"budget": {"tokens": 20}})
        fake.enqueue(tool_call_reply([("read_file", {"path": "x"})]), text_reply("never"))
        finished = await finish(srv, cid, "go")
        assert finished["status"] == "budget_exceeded"
        assert finished["budget"] == {"kind": "tokens", "limit": 20, "used": 29}
        other = await srv.client.patch(f"/api/conversations/{cid}", json={"budget": {"tokens": 0}})
        assert other.status_code == 422  # a limit of nothing is not a limit


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"budget": {"step": 3}}', "budget.step: Extra inputs are not permitted"),
        (b'{"budget": {"cost": Infinity}}', "budget.cost: Input should be a finite number"),
        (b'{"budget": {"total_cost": NaN}}', "budget.total_cost: Input should be a finite"),
        (b'{"budget": {"tool_seconds": -1}}', "budget.tool_seconds: Input should be greater"),
        (b'{"budget": {"steps": 0}}', "budget.steps: Input should be greater than or equal"),
    ],
)
async def test_a_budget_that_would_not_limit_anything_is_refused(
    tmp_path: Path, fake: FakeOpenAIServer, body: bytes, says: str
) -> None:
    # A misspelt or infinite spend cap must not answer 200 and leave the runs unlimited.
    async with serve(tmp_path, fake) as srv:
        cid = await srv.create_conversation()
        await srv.client.patch(f"/api/conversations/{cid}", json={"budget": {"steps": 7}})
        response = await srv.client.patch(
            f"/api/conversations/{cid}", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_request" and error["message"].startswith(says), error
        kept = (await srv.client.get(f"/api/conversations/{cid}")).json()["budget"]
        assert kept == {**dict.fromkeys(kept), "steps": 7}  # the stored budget is untouched
