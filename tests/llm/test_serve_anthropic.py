"""`burrow serve` with BURROW_MODEL=anthropic:<model> against the fake Messages API: tools
run in the real sandbox, thinking comes back signed and byte-identical (also after a
restart), retries and stalls are visible in the journal."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from burrow.llm.retry import KEPT
from tests.api.harness import ADMIN_PASSWORD, log_in, running_server, serve_process, sse_events
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    message,
    overloaded,
    text,
    thinking,
    tool_use,
)

KEY = "sk-ant-e2e-0123456789abcdef"
SIGNATURE = "ErUBCkYIBRgCIkB+/sig=" + "Zm9vYmFy" * 40
THOUGHT = "The user wants a file; I will write it with bash and show it."


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(api_key=KEY) as srv:
        yield srv


async def finish(client: httpx.AsyncClient, cid: str, content: str) -> list[dict[str, Any]]:
    """Send `content`, follow the stream to its run's end, return the run's events."""
    sent = await client.post(f"/api/conversations/{cid}/messages", json={"content": content})
    assert sent.status_code == 202, sent.text
    run_id = sent.json()["run_id"]
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(60):
        async for event in sse_events(client, cid):
            if event["run_id"] == run_id:
                seen.append(event)
                if event["type"] == "run.finished":
                    return seen
    raise AssertionError("the stream ended before the run did")


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == kind]


async def test_tool_call_in_the_sandbox_and_signed_thinking_across_a_restart(
    tmp_path: Path, fake: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    fake.enqueue(
        message(
            [
                thinking(THOUGHT, SIGNATURE),
                tool_use("toolu_01", "bash", {"command": "echo burrowed > out.txt && cat out.txt"}),
            ],
            cache=(1500, 0),
        ),
        message([text("Wrote out.txt.")], cache=(0, 1500)),
    )
    model = "anthropic:claude-test"
    with serve_process(tmp_path, model) as (_, base):
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            first = await finish(client, cid, "write out.txt")
            # The conversation's own totals count the cache too (DESIGN §8's usage).
            totals = (await client.get(f"/api/conversations/{cid}")).json()["usage"]
    assert (totals["cache_write_tokens"], totals["cache_read_tokens"]) == (1500, 1500), totals

    assert of(first, "run.finished")[0]["status"] == "completed", first
    [finished] = of(first, "tool.finished")
    assert finished["output"].strip() == "burrowed" and finished["exit_code"] == 0
    assert "".join(d["text"] for d in of(first, "assistant.thinking.delta")) == THOUGHT
    journaled = of(first, "assistant.message")[0]["thinking_blocks"]
    assert journaled == [{"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}]
    usage = of(first, "usage")
    assert [u["cache_write_tokens"] for u in usage] == [1500, 0]
    assert [u["cache_read_tokens"] for u in usage] == [0, 1500]
    assert of(first, "run.finished")[0]["usage"]["cache_read_tokens"] == 1500

    # The second request of the run sends the thinking back as it came, signature and all.
    sent_back = {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}
    assert fake.requests[1]["messages"][1]["content"][0] == sent_back
    assert json.dumps(SIGNATURE).encode() in fake.raw_requests[1]

    fake.enqueue(overloaded(), message([text("It says burrowed.")]))
    # A new server on the same data directory: the context is rebuilt from the journal.
    async with running_server(tmp_path, None, model=model) as srv:
        second = await finish(srv.client, cid, "what is in it?")
        # The killed server left the workspace mounted; deleting unmounts it.
        assert (await srv.client.delete(f"/api/conversations/{cid}")).status_code == 204

    assert of(second, "run.finished")[0]["status"] == "completed", second
    [retry] = of(second, "retry")
    assert retry["attempt"] == 1 and retry["delay_s"] > 0
    assert (
        retry["reason"] == f"The Anthropic API at {fake.base_url} is overloaded (529: Overloaded)."
    )
    # After the restart (and a retried 529) the same turn goes out byte for byte.
    assert len(fake.requests) == 4
    for request, raw in zip(fake.requests[2:], fake.raw_requests[2:], strict=True):
        assert request["messages"][1] == fake.requests[1]["messages"][1]
        assert json.dumps(SIGNATURE).encode() in raw
    assert fake.requests[3]["messages"][-1]["content"][-1]["text"] == "what is in it?"


async def stalled_run(
    tmp_path: Path, fake: FakeAnthropicServer
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    async with running_server(
        tmp_path,
        None,
        model="anthropic:claude-test",
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=fake.base_url,
        model_first_token_timeout=1.0,
        model_idle_timeout=1.0,
    ) as srv:
        cid = await srv.create_conversation()
        events = await finish(srv.client, cid, "hello")
        return events, await srv.events(cid)


async def test_a_stall_before_anything_was_shown_is_retried_visibly(
    tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    # message_start and a ping, then nothing: the first-token deadline passes.
    fake.enqueue(message([text("lost")], stop_after=2, end="hang"), message([text("Hi!")]))
    events, _ = await stalled_run(tmp_path, fake)
    assert of(events, "run.finished")[0]["status"] == "completed"
    [retry] = of(events, "retry")
    assert retry["reason"] == (
        f"The model server at {fake.base_url} sent nothing for 1 s: it may be overloaded. "
        "Try again."
    )
    assert [m["content"] for m in of(events, "assistant.message")] == ["Hi!"]


async def test_a_stall_after_text_fails_the_run_keeping_the_text(
    tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    fake.enqueue(
        message([text("Here is half")], stop_after=5, end="hang"), message([text("a copy")])
    )
    events, journal = await stalled_run(tmp_path, fake)
    [finished] = of(events, "run.finished")
    assert finished["status"] == "failed"
    assert finished["error"] == (
        f"The model stream stalled: the server at {fake.base_url} sent nothing for 1 s in the "
        f"middle of the answer (limit: BURROW_MODEL_IDLE_TIMEOUT). {KEPT}"
    )
    assert of(events, "retry") == []
    assert [m["content"] for m in of(events, "assistant.message")] == ["Here is "]
    shown = "".join(d["text"] for d in of(journal, "assistant.text.delta"))
    assert shown == "Here is "
    assert fake.pending == 1  # never asked again


def test_burrow_run_shows_a_retry_in_its_transcript(
    tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    fake.enqueue(overloaded(), message([text("Hello from Claude.")]))
    command = [sys.executable, "-m", "burrow.cli", "run", "--data-dir", str(tmp_path)]
    command += ["--model", "anthropic:claude-test", "hi"]
    env = {
        **os.environ,
        "BURROW_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": fake.base_url,
    }
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    retry = (
        f"[The Anthropic API at {fake.base_url} is overloaded (529: Overloaded). Trying again in"
    )
    assert retry in done.stdout
    assert done.stdout.index(retry) < done.stdout.index("Hello from Claude.")


async def test_two_parallel_tool_calls_run_and_go_back_as_one_turn_of_results(
    tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    fake.enqueue(
        message(
            [
                text("Both at once."),
                tool_use("toolu_a", "bash", {"command": "echo one"}),
                tool_use("toolu_b", "write_file", {"path": "two.txt", "content": "two"}),
            ]
        ),
        message([text("Done.")]),
    )
    async with running_server(
        tmp_path,
        None,
        model="anthropic:claude-test",
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=fake.base_url,
    ) as srv:
        cid = await srv.create_conversation()
        await srv.client.patch(f"/api/conversations/{cid}", json={"approval_mode": "auto"})
        events = await finish(srv.client, cid, "do two things")
    assert of(events, "run.finished")[0]["status"] == "completed", events
    [calls] = [m["tool_calls"] for m in of(events, "assistant.message") if m["tool_calls"]]
    assert [c["id"] for c in calls] == ["toolu_a", "toolu_b"]
    finished = {f["call_id"]: f for f in of(events, "tool.finished")}
    assert finished["toolu_a"]["output"].strip() == "one" and not finished["toolu_b"]["is_error"]
    # The API requires every tool_use answered in the very next user turn: both results
    # there, in the order of the calls.
    assistant, results = fake.requests[1]["messages"][1:3]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert results["role"] == "user"
    assert [(b["type"], b["tool_use_id"]) for b in results["content"]] == [
        ("tool_result", "toolu_a"),
        ("tool_result", "toolu_b"),
    ]
    assert results["content"][0]["content"].strip() == "one"
