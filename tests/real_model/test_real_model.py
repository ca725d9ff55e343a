"""A real model drives Burrow: SmolLM2-135M-Instruct on llama.cpp (server.mjs), through
Burrow's own OpenAI provider, a real `burrow serve` and real sandboxes.

Asserted from the journal and from what the model server was sent: the protocol path,
never a 135M model's task success. The model decodes greedily, so a request gets the same
answer each time; where the tests name what it does (it lists files with `echo `, it cuts
a long story off at --n-predict), that is what it did when they were written.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from burrow.tools.registry import default_tools
from burrow.tools.todo import TODO_TOOL
from tests.api.harness import ADMIN_PASSWORD, log_in, serve_process
from tests.real_model.conftest import MODEL, RealModel, real_model

pytestmark = pytest.mark.timeout(330)
STORY = "Write a long story about a cat into the file story.txt."

Event = dict[str, Any]


@asynccontextmanager
async def burrow(
    tmp_path: Path, model: RealModel, api_key: str = "sk-local"
) -> AsyncIterator[httpx.AsyncClient]:
    """A real server whose model is the real one; yields an administrator's client."""
    env = {"OPENAI_API_KEY": api_key, "OPENAI_BASE_URL": model.base_url}
    with serve_process(tmp_path / "data", MODEL, env) as (_, base):
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            yield client


async def converse(
    client: httpx.AsyncClient, prompt: str, profile: str | None = None, **budget: float
) -> list[Event]:
    """One run from `prompt` to its end; the conversation's whole journal."""
    body = {"title": "real model", "profile": profile} if profile else {"title": "real model"}
    created = await client.post("/api/conversations", json=body)
    cid = created.json()["id"]
    if budget:
        patched = await client.patch(f"/api/conversations/{cid}", json={"budget": budget})
        assert patched.status_code == 200, patched.text
    sent = await client.post(f"/api/conversations/{cid}/messages", json={"content": prompt})
    assert sent.status_code == 202, sent.text
    deadline = time.monotonic() + 280
    while time.monotonic() < deadline:
        page = await client.get(
            f"/api/conversations/{cid}/events", params={"after": 0, "format": "json"}
        )
        events: list[Event] = page.json()
        if any(e["type"] == "run.finished" for e in events):
            return events
        await asyncio.sleep(0.25)
    raise AssertionError("the run did not finish within 280 s")


def of(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == kind]


def assert_whole(events: list[Event], answered: list[dict[str, Any]]) -> None:
    """The journal's invariants: no gap, one start and one end, every call the model made
    started and finished once, and one usage event per answer, with the server's count."""
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len(of(events, "run.started")) == len(of(events, "run.finished")) == 1
    made = [call["id"] for answer in answered for call in answer["calls"]]
    journaled = [c["id"] for m in of(events, "assistant.message") for c in m["tool_calls"]]
    assert journaled == made
    assert [s["call_id"] for s in of(events, "tool.started")] == made
    assert [f["call_id"] for f in of(events, "tool.finished")] == made
    usage = of(events, "usage")
    assert [u["prompt_tokens"] for u in usage] == [a["prompt_tokens"] for a in answered]
    assert [u["completion_tokens"] for u in usage] == [a["completion_tokens"] for a in answered]


def sent_results(request: dict[str, Any]) -> dict[str, str]:
    """The tool results a request carried to the model, by call id."""
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


async def test_the_models_own_calls_run_and_come_back_to_it_until_the_budget_stops_it(
    tmp_path: Path,
) -> None:
    with real_model(tmp_path) as model:
        async with burrow(tmp_path, model) as client:
            events = await converse(client, "List the files in the workspace.", steps=3)
            providers = (await client.get("/api/settings/providers")).json()
        answered = model.requests()
        rss = model.rss_mb()
    # What Burrow saw of the server, as the settings page shows it.
    openai = next(p for p in providers if p["id"] == "openai")
    assert openai["kind"] == "openai_compatible" and openai["base_url"] == model.base_url
    assert openai["capabilities"] == {
        "stream_tools": True,
        "tool_format": "native",
        "context_window": 8192,  # server.mjs's --context, said at llama.cpp's /props
    }
    assert_whole(events, answered)
    assert len(answered) == 3  # one request per step, then the budget
    finished = of(events, "run.finished")[0]
    assert finished["status"] == "budget_exceeded"
    assert finished["budget"] == {"kind": "steps", "limit": 3, "used": 3}
    ran = [f for f in of(events, "tool.finished") if f["exit_code"] is not None]
    assert ran, "none of the model's calls ran a command"
    # Each result went back to the model in the next request, as the model's tool message.
    results = {f["call_id"]: f["output"] for f in of(events, "tool.finished")}
    for before, after in itertools.pairwise(answered):
        for call in before["calls"]:
            assert call["id"] in sent_results(after)
            assert results[call["id"]] in sent_results(after)[call["id"]]
    # Tool turns were streamed (the server can), and the model's prompt was Burrow's own.
    assert all(a["stream"] for a in answered)
    assert "bash" in answered[0]["tools"]
    print(f"\nreal model: {_speed(answered)}, server RSS {rss:.0f} MB")


async def test_a_cut_off_call_is_refused_with_an_error_the_model_reads_then_the_guard_stops_it(
    tmp_path: Path,
) -> None:
    """At --n-predict 40 the model's long story is cut off inside its arguments: JSON
    that does not parse. Burrow runs nothing, tells the model why, and when the model
    repeats the call unchanged, the loop guard warns it and then ends the run."""
    with real_model(tmp_path, "--n-predict", "40") as model:
        async with burrow(tmp_path, model) as client:
            # The tools it had when this was written: offered the `todo` checklist as well,
            # the 135M model fills that in (a short call that ends) instead of the story.
            tools = [name for name in default_tools() if name != TODO_TOOL]
            made = await client.put("/api/profiles/story", json={"tools": tools})
            assert made.status_code in (200, 201), made.text
            events = await converse(client, STORY, profile="story")
        answered = model.requests()
    assert_whole(events, answered)
    assert all(a["finish"] == "length" for a in answered), [a["finish"] for a in answered]
    finished = of(events, "tool.finished")
    assert finished and all(f["is_error"] and f["exit_code"] is None for f in finished)
    assert all("are not valid JSON" in f["output"] for f in finished)
    for before, after in itertools.pairwise(answered):
        (call,) = before["calls"]
        assert "are not valid JSON" in sent_results(after)[call["id"]]
    third = answered[2]["calls"][0]["id"]
    assert "has now failed 3 times in a row" in sent_results(answered[3])[third]
    end = of(events, "run.finished")[0]
    assert end["status"] == "failed"
    assert end["error"].startswith("Stopped: the same failing call was made 5 times in a row")


async def test_a_server_that_refuses_streamed_tools_gets_its_tool_turns_unstreamed(
    tmp_path: Path,
) -> None:
    """llama-cpp-python's refusal, from a real model server: the turn is asked again
    unstreamed, and the next tool turns go unstreamed from the start."""
    with real_model(tmp_path, "--refuse-streamed-tools") as model:
        async with burrow(tmp_path, model) as client:
            events = await converse(client, "List the files in the workspace.", steps=2)
            providers = (await client.get("/api/settings/providers")).json()
        logged = model.requests()
    openai = next(p for p in providers if p["id"] == "openai")
    assert openai["capabilities"]["stream_tools"] is False
    assert logged[0] == {"stream": True, "refused": True}
    answered = logged[1:]
    assert len(answered) == 2 and not any(a["stream"] for a in answered)
    assert_whole(events, answered)
    assert of(events, "run.finished")[0]["status"] == "budget_exceeded"
    assert not of(events, "retry")  # a fallback, not a failure retried


async def test_a_wrong_key_is_the_servers_own_refusal_and_the_right_one_lists_its_model(
    tmp_path: Path,
) -> None:
    with real_model(tmp_path, "--api-key", "sk-right") as model:
        async with burrow(tmp_path, model, api_key="sk-wrong") as client:
            events = await converse(client, "Hello")
            probe = await client.post("/api/settings/providers/openai/test", json={})
            right = await client.post(
                "/api/settings/providers/openai/test", json={"api_key": "sk-right"}
            )
    end = of(events, "run.finished")[0]
    assert end["status"] == "failed"
    assert "401" in end["error"] and "Incorrect API key provided." in end["error"]
    assert "sk-wrong" not in end["error"]
    assert probe.status_code == 200
    assert probe.json()["ok"] is False and "Incorrect API key provided." in probe.json()["detail"]
    assert right.json()["ok"] is True and right.json()["models"] == [MODEL]


def _speed(answered: list[dict[str, Any]]) -> str:
    tokens = sum(a["completion_tokens"] for a in answered)
    prompt = sum(a["prompt_tokens"] for a in answered)
    seconds = sum(a["seconds"] for a in answered)
    return f"{len(answered)} answers, {prompt} prompt + {tokens} output tokens in {seconds:.1f}s"


async def test_the_window_is_learnt_from_the_server_and_the_run_compacts_within_it(
    tmp_path: Path,
) -> None:
    """llama.cpp's server says its window at /props (here 2,048 tokens, where the catalog
    would assume 128,000 for a model it does not know): Burrow compacts before the
    conversation outgrows it, no request is refused as too long, and the summary call is
    bounded to what the context keeps of it."""
    with real_model(tmp_path, "--context", "2048") as model:
        async with burrow(tmp_path, model) as client:
            # It compacts at about the 9th step; two more show the run going on within it.
            events = await converse(client, "List the files in the workspace.", steps=11)
            listed = (await client.get("/api/conversations")).json()
        answered = model.requests()
    assert listed[0]["context"]["window"] == 2048
    assert of(events, "context.compacted"), "the run never compacted"
    assert max(a["prompt_tokens"] for a in answered) < 2048
    # The summary call is bounded (it used to write up to the server's 512-token cap,
    # most of it cut off afterwards).
    summaries = [a for a in answered if not a["tools"]]
    assert summaries and all(a["completion_tokens"] < 512 for a in summaries), summaries
    end = of(events, "run.finished")[0]
    assert end["status"] == "budget_exceeded", end
