"""What compaction adds around the model's summary call, on a 2,000-event conversation
(target: <= 50 ms).

A real SQLite journal holds a conversation of 2,000 events (turns of a user message, tool
calls with ~1 KB outputs, usage). Measured: choosing the cut, rendering the transcript,
the events, writing them to the journal and applying them to the live context, i.e. all
of `compact` + append + apply except the summary call itself. Baseline, in the same run:
that summary call (a scripted provider streaming a summary of ~300 words), timed inside
the same compactions. Also shown: rebuilding the context from the whole journal after a
restart, with the compaction record, beside the same rebuild without it.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, report
from burrow.llm.base import Message, Pricing, ScriptedTurn, StreamEvent, ToolSpec
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal import events as ev
from burrow.runs.journal.journal import Journal
from burrow.runs.loop.context import ModelContext
from burrow.runs.loop.hooks.compaction import CompactionPolicy, compact
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.events import EventStore
from burrow.store.migrate import open_database
from burrow.store.records import NewEvent

EVENTS = 2_000
ROUNDS = 15
SUMMARY = " ".join(f"word{i}" for i in range(300))
POLICY = CompactionPolicy(window=200_000, compact_at=0.8)


class TimedProvider(ScriptedProvider):
    """The scripted summarizer, adding up the time spent inside its calls."""

    def __init__(self) -> None:
        super().__init__([ScriptedTurn(text=SUMMARY)] * (ROUNDS + 1))
        self.seconds = 0.0

    async def stream(  # type: ignore[override]
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        started = time.perf_counter()
        async for item in super().stream(messages, tools, max_tokens):
            self.seconds += time.perf_counter() - started
            yield item
            started = time.perf_counter()
        self.seconds += time.perf_counter() - started


def turn(i: int) -> list[NewEvent]:
    """Ten events: a user message, two tool calls with their results, an answer, usage."""
    run = f"r{i}"
    calls = [
        ev.ToolCall(id=f"c{i}_{k}", name="bash", arguments={"command": f"make step{k}"})
        for k in range(2)
    ]
    outputs = ["ok " * 350, "done " * 200]
    return [
        ev.make(ev.UserMessage(content=f"step {i}: build the next part", steering=False), run),
        ev.make(ev.RunStarted(run_id=run), run),
        ev.make(ev.AssistantMessage(content="", thinking="", tool_calls=calls), run),
        ev.make(ev.UsageReported(prompt_tokens=1000 + i, completion_tokens=20, cost=0.0), run),
        *(
            e
            for call, output in zip(calls, outputs, strict=True)
            for e in (
                ev.make(ev.ToolStarted(call_id=call.id, name="bash", arguments={}), run),
                ev.make(ev.ToolFinished(call_id=call.id, output=output, is_error=False), run),
            )
        ),
        ev.make(ev.AssistantMessage(content=f"Part {i} built.", thinking="", tool_calls=[]), run),
        ev.make(ev.RunFinished(status="completed", error=None, usage=ev.Usage()), run),
    ]


async def projection(journal: Journal, cid: str) -> ModelContext:
    context = ModelContext()
    for event in await journal.read(cid):
        context.apply(event)
    return context


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_database(f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}")
        owner = (await AccountStore(db).get_or_create("bench")).id
        journal = Journal(EventStore(db))
        conversations = ConversationStore(db)
        provider = TimedProvider()
        around: list[float] = []
        summary_calls: list[float] = []
        rebuild_plain: list[float] = []
        rebuild_compacted: list[float] = []
        for _ in range(ROUNDS):
            cid = (await conversations.create(owner, "bench")).id
            for i in range(EVENTS // 10):
                await journal.append(cid, *turn(i))
            started = time.perf_counter()
            context = await projection(journal, cid)
            rebuild_plain.append(time.perf_counter() - started)

            provider.seconds = 0.0
            started = time.perf_counter()
            events, _ = await compact(
                context, provider, POLICY, Pricing(), overhead=900, run_id=None
            )
            for event in await journal.append(cid, *events):
                context.apply(event)
            total = time.perf_counter() - started
            around.append(total - provider.seconds)
            summary_calls.append(provider.seconds)
            assert any(SUMMARY in m.content for m in context.messages)

            started = time.perf_counter()
            rebuilt = await projection(journal, cid)
            rebuild_compacted.append(time.perf_counter() - started)
            assert rebuilt.messages == context.messages
        await db.close()
    report(
        f"compaction around the summary call, {EVENTS} events, p50",
        p50(around) * 1000,
        "ms",
        "the summary call itself (scripted)",
        p50(summary_calls) * 1000,
        "<= 50 ms",
    )
    report(
        f"context rebuilt from {EVENTS + 2} events with a compaction, p50",
        p50(rebuild_compacted) * 1000,
        "ms",
        f"the same {EVENTS} events without it",
        p50(rebuild_plain) * 1000,
        "about 1x (a restart rebuilds it as fast)",
    )


if __name__ == "__main__":
    asyncio.run(main())
