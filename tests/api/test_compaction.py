"""Compaction through a real server, a real sandbox and a fake OpenAI server that rejects
requests over its window exactly as OpenAI does (400 `context_length_exceeded`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from burrow.llm.anthropic_messages import AnthropicProvider
from burrow.llm.openai_compat import OpenAICompatProvider
from burrow.llm.retry import RetryingProvider
from burrow.runs.loop.hooks.compaction import SUMMARY_PROMPT
from tests.api.harness import RunningServer, running_server
from tests.fakes import anthropic_server as claude
from tests.fakes.openai_server import (
    MODEL,
    FakeOpenAIServer,
    Reply,
    context_length_error,
    request_tokens,
    text_reply,
    tool_call_reply,
)

WINDOW = 5_000  # tokens, by the fake's count; the tools alone take about 900
SUMMARY = "SUMMARY: the agent printed blocks of x with python; nothing failed."
PRINT = {"command": "python3 -c \"print('x' * 1500)\""}  # ~400 tokens of output each


def is_summary_call(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == SUMMARY_PROMPT


def scripted(steps: int) -> Iterator[Reply]:
    for _ in range(steps):
        yield tool_call_reply([("bash", PRINT)])
    yield text_reply("All blocks printed.")
    while True:
        yield text_reply("Continuing.")


def responder(answers: Iterator[Reply]) -> Callable[[dict[str, Any]], Reply]:
    def respond(body: dict[str, Any]) -> Reply:
        return text_reply(SUMMARY) if is_summary_call(body) else next(answers)

    return respond


def provider(fake: FakeOpenAIServer) -> Callable[[], RetryingProvider]:
    return lambda: RetryingProvider(OpenAICompatProvider(MODEL, "sk-test", fake.base_url))


def assert_calls_paired(messages: list[dict[str, Any]]) -> None:
    """Every tool result follows the assistant message that made its call, and every call
    has its result (what OpenAI and Anthropic both require)."""
    open_calls: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, m
            open_calls.discard(m["tool_call_id"])
            continue
        assert not open_calls, f"calls without results: {open_calls}"
        if m["role"] == "assistant":
            open_calls = {c["id"] for c in m.get("tool_calls") or []}
    assert not open_calls


async def finish(srv: RunningServer, cid: str, content: str) -> dict[str, Any]:
    run = await srv.send(cid, content)
    return await srv.run_finished(cid, run["run_id"], timeout=60)


async def test_a_long_run_finishes_through_compaction_and_a_restart_sends_the_same_context(
    tmp_path: Path,
) -> None:
    answers = scripted(12)
    with FakeOpenAIServer(context_window=WINDOW, responder=responder(answers)) as fake:
        async with running_server(tmp_path, provider(fake), context_window=WINDOW) as srv:
            cid = await srv.create_conversation()
            finished = await finish(srv, cid, "print twelve blocks of x, one per command")
            assert finished["data"]["status"] == "completed", finished
            events = await srv.events(cid)
            conversation = (await srv.client.get(f"/api/conversations/{cid}")).json()
        compactions = [e for e in events if e["type"] == "context.compacted"]
        assert compactions, "twelve blocks of ~400 tokens cannot fit in 5,000 without one"
        assert all(c["data"]["summary"] == SUMMARY for c in compactions)
        assert all(c["data"]["tokens_after"] < c["data"]["tokens_before"] for c in compactions)
        # No request ever passed the window (the fake would have answered 400).
        assert max(request_tokens(body) for body in fake.requests) <= WINDOW
        answered = [b for b in fake.requests if not is_summary_call(b)]
        for body in answered:
            assert_calls_paired(body["messages"])
        after = answered[-1]["messages"]
        # The user's own message is verbatim, the summary stands for the older turns.
        assert after[1] == {"role": "user", "content": "print twelve blocks of x, one per command"}
        assert any(SUMMARY in str(m.get("content")) for m in after)
        assert len(after) < 2 + 2 * 12
        assert conversation["context"]["window"] == WINDOW
        assert 0 < conversation["context"]["used"] <= WINDOW
        before_restart = len(fake.requests)

        async with running_server(tmp_path, provider(fake), context_window=WINDOW) as srv:
            finished = await finish(srv, cid, "and now?")
            assert finished["data"]["status"] == "completed", finished
        [request] = fake.requests[before_restart:]
        assert not is_summary_call(request)
        # The restarted server sends what the first one sent for its last call, then that
        # call's answer and the new message.
        assert request["messages"][: len(after)] == after
        assert request["messages"][len(after)]["content"] == "All blocks printed."
        assert request["messages"][-1] == {"role": "user", "content": "and now?"}


async def test_a_context_too_long_error_compacts_once_and_retries_once(tmp_path: Path) -> None:
    # Burrow believes the window is large (no compaction of its own); the server's is small.
    answers = scripted(8)
    with FakeOpenAIServer(context_window=WINDOW - 1_000, responder=responder(answers)) as fake:
        async with running_server(tmp_path, provider(fake), context_window=200_000) as srv:
            cid = await srv.create_conversation()
            finished = await finish(srv, cid, "print eight blocks of x")
            events = await srv.events(cid)
    assert finished["data"]["status"] == "completed", finished
    over = [i for i, b in enumerate(fake.requests) if request_tokens(b) > WINDOW - 1_000]
    assert len(over) == 1  # rejected once ...
    assert is_summary_call(fake.requests[over[0] + 1])  # ... compacted ...
    retried = fake.requests[over[0] + 2]  # ... and the same step tried again, shorter
    assert request_tokens(retried) <= WINDOW - 1_000
    assert retried["messages"][-1]["role"] == "tool"
    assert len([e for e in events if e["type"] == "context.compacted"]) == 1
    assert not [e for e in events if e["type"] == "retry"]  # not a transient failure


async def test_a_context_still_too_long_after_compaction_fails_the_run_after_one_retry(
    tmp_path: Path,
) -> None:
    calls = itertools.count()
    steps = scripted(3)

    def respond(body: dict[str, Any]) -> Reply:
        if is_summary_call(body):
            return text_reply(SUMMARY)
        if next(calls) < 3:
            return next(steps)
        return context_length_error(WINDOW, WINDOW + 1)  # whatever is sent

    with FakeOpenAIServer(responder=respond) as fake:
        async with running_server(tmp_path, provider(fake)) as srv:
            cid = await srv.create_conversation()
            finished = await finish(srv, cid, "print blocks")
            events = await srv.events(cid)
    assert finished["data"]["status"] == "failed"
    assert "too long" in finished["data"]["error"]
    kinds = ["summary" if is_summary_call(b) else "answer" for b in fake.requests]
    assert kinds == ["answer"] * 3 + ["answer", "summary", "answer"]
    assert len([e for e in events if e["type"] == "context.compacted"]) == 1


async def test_compact_on_demand_is_refused_during_a_run_and_rebuilds_the_next_request(
    tmp_path: Path,
) -> None:
    slow = tool_call_reply([("bash", {"command": "sleep 3"})])
    answers = iter([tool_call_reply([("bash", PRINT)]), text_reply("printed"), slow])

    def respond(body: dict[str, Any]) -> Reply:
        if is_summary_call(body):
            return text_reply(SUMMARY)
        return next(answers, text_reply("done"))

    with FakeOpenAIServer(responder=respond) as fake:
        async with running_server(tmp_path, provider(fake)) as srv:
            cid = await srv.create_conversation()
            fresh = await srv.client.post(f"/api/conversations/{cid}/compact", json={})
            assert fresh.status_code == 409
            assert fresh.json()["error"]["code"] == "nothing_to_compact"

            await finish(srv, cid, "print a block")
            run = await srv.send(cid, "now sleep")
            await srv.wait_for(
                cid, lambda e: e["type"] == "tool.started" and e["run_id"] == run["run_id"]
            )
            busy = await srv.client.post(f"/api/conversations/{cid}/compact", json={})
            assert busy.status_code == 409
            assert busy.json()["error"]["code"] == "run_active"
            assert "run" in busy.json()["error"]["message"]
            await srv.run_finished(cid, run["run_id"])

            compacted = await srv.client.post(f"/api/conversations/{cid}/compact", json={})
            assert compacted.status_code == 202, compacted.text
            body = compacted.json()
            [event] = [e for e in await srv.events(cid) if e["type"] == "context.compacted"]
            assert event["seq"] == body["seq"] and event["data"]["summary"] == SUMMARY
            assert event["run_id"] is None
            conversation = (await srv.client.get(f"/api/conversations/{cid}")).json()
            assert conversation["context"]["used"] == body["tokens_after"]

            await finish(srv, cid, "what now?")
        sent = fake.requests[-1]["messages"]
        users = [m["content"] for m in sent if m["role"] == "user"]
        # The older turn became the summary, after its user message; the latest turn (the
        # one asked "now sleep") stayed whole.
        assert users[0] == "print a block" and users[1].endswith(SUMMARY)
        assert users[2:] == ["now sleep", "what now?"]
        assert "printed" not in [m.get("content") for m in sent if m["role"] == "assistant"]
        assert_calls_paired(sent)


async def test_anthropics_prompt_is_too_long_compacts_once_and_retries(tmp_path: Path) -> None:
    with claude.FakeAnthropicServer() as fake:
        fake.enqueue(
            *[claude.message([claude.tool_use(f"toolu_{i}", "bash", PRINT)]) for i in range(3)],
            claude.prompt_too_long(),  # 400 invalid_request_error, as the API words it
            claude.message([claude.text(SUMMARY)]),
            claude.message([claude.text("All blocks printed.")]),
        )
        model = "claude-haiku-4-5"
        provider = lambda: RetryingProvider(AnthropicProvider(model, "sk-ant", fake.base_url))  # noqa: E731
        async with running_server(tmp_path, provider) as srv:
            cid = await srv.create_conversation()
            finished = await finish(srv, cid, "print three blocks")
            events = await srv.events(cid)
    assert finished["data"]["status"] == "completed", finished
    rejected, summary, retried = fake.requests[3:6]
    assert "compact" in str(summary["system"]) and not summary.get("tools")
    assert len(retried["messages"]) < len(rejected["messages"])
    assert retried["messages"][0]["content"][0]["text"] == "print three blocks"
    assert len(fake.requests) == 6 and fake.pending == 0
    assert len([e for e in events if e["type"] == "context.compacted"]) == 1


@pytest.mark.parametrize("compact_at", [None, "0.3"])
async def test_the_window_and_the_threshold_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compact_at: str | None
) -> None:
    # Six blocks fill about 40% of a 10,000-token window: past BURROW_COMPACT_AT=0.3,
    # short of the default 0.8. Both settings are read as an operator sets them.
    monkeypatch.setenv("BURROW_CONTEXT_WINDOW", "10000")
    if compact_at is not None:
        monkeypatch.setenv("BURROW_COMPACT_AT", compact_at)
    answers = scripted(6)
    with FakeOpenAIServer(context_window=10_000, responder=responder(answers)) as fake:
        async with running_server(tmp_path, provider(fake)) as srv:
            cid = await srv.create_conversation()
            finished = await finish(srv, cid, "print six blocks of x")
            assert finished["data"]["status"] == "completed", finished
            events = await srv.events(cid)
            conversation = (await srv.client.get(f"/api/conversations/{cid}")).json()
    assert conversation["context"]["window"] == 10_000
    compactions = [e["data"] for e in events if e["type"] == "context.compacted"]
    answered = [b for b in fake.requests if not is_summary_call(b)]
    largest = max(request_tokens(b) for b in answered)
    if compact_at is None:
        assert not compactions and 3_000 < largest < 8_000  # under the default threshold
    else:
        assert compactions, "the context passed 30% of the window"
        # Compacted as soon as a request would pass 30% (one block more than it), and no
        # request went out much past it (the fake counts JSON too: a little more).
        assert all(3_000 < c["tokens_before"] < 3_500 for c in compactions), compactions
        assert largest < 3_500
