"""Agent-loop overhead per step (DESIGN.md §7: <= 1 ms, flat from 10 to 1,000 steps),
scripted model and a no-op tool.

Baseline, in the same run: the same scripted answers consumed (from a context that grows
the same way) and the same no-op tool called by a bare loop that journals nothing. The
difference is what the loop adds: the journal writes, context projection, hooks and event
fan-out of every step. It is measured for runs of 10, 100 and 1,000 steps; the ratio of the
1,000-step figure to the 10-step one shows whether a step gets dearer as the run grows.

A step makes two durable journal commits (the answer with the first tool.started, before the
tool runs; tool.finished, before the next model call reads it). Their floor is measured in
the same run and printed beside the overhead: the same two appends, one after the other, on
a journal of their own, with no loop around them. What exceeds it is the loop's own work.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, report
from burrow.llm.base import Message, Pricing, ScriptedTurn, StreamEvent, ToolCall, ToolSpec
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal import events as ev
from burrow.runs.journal.journal import Journal
from burrow.runs.loop.context import ModelContext
from burrow.runs.loop.hooks.base import PreviewOpened, SystemPrompt
from burrow.runs.loop.hooks.budget import Budget, BudgetHook
from burrow.runs.loop.hooks.compaction import CompactionPolicy, Compactor
from burrow.runs.loop.hooks.guard import LoopGuard
from burrow.runs.loop.loop import SYSTEM_PROMPT, AgentRun, RunEnv
from burrow.sandbox.backend import Sandbox
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.events import EventStore
from burrow.store.migrate import open_database
from burrow.tools.base import ToolContext, ToolKind, ToolResult

STEP_COUNTS = (10, 100, 1000)
STEPS_MEASURED = 300  # step durations per figure at least, so short runs are not noise
ROUNDS = 3
LAST_STEPS = 100  # of a long run, only its last steps count: the context is largest there


class TimedProvider(ScriptedProvider):
    """The scripted model, noting when each step (one model call) begins."""

    def __init__(self, turns: list[ScriptedTurn]) -> None:
        super().__init__(turns)
        self.calls: list[float] = []

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        self.calls.append(time.perf_counter())
        return super().stream(messages, tools, max_tokens)


def step_seconds(calls: list[float]) -> list[float]:
    """Durations of the last steps: from one model call to the next."""
    durations = [b - a for a, b in itertools.pairwise(calls)]
    return durations[-LAST_STEPS:]


class NoopTool:
    spec = ToolSpec("noop", "Does nothing.", {"type": "object", "properties": {}})
    kind = ToolKind(reads=True)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(output="ok")


def script(steps: int) -> list[ScriptedTurn]:
    return [ScriptedTurn(tool_calls=[("noop", {})]) for _ in range(steps)] + [
        ScriptedTurn(text="done")
    ]


async def no_sandbox() -> Sandbox:
    raise AssertionError("the no-op tool never asks for the sandbox")


async def bare_loop(steps: int) -> list[float]:
    """Seconds per step of the model and the tool alone, the context growing as in a run
    (the scripted model reads all of it to count prompt tokens)."""
    provider, tool = TimedProvider(script(steps)), NoopTool()
    messages = [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content="go")]
    for i in range(steps + 1):
        async for _item in provider.stream(messages, [tool.spec]):
            pass
        result = await tool.run({}, ToolContext(sandbox=no_sandbox, call_id="c"))
        call = ToolCall(id=f"c{i}", name="noop", arguments="{}")
        messages.append(Message(role="assistant", content="", tool_calls=(call,)))
        messages.append(Message(role="tool", content=result.output, tool_call_id=call.id))
    return step_seconds(provider.calls)


async def new_journal(path: Path) -> tuple[Database, Journal, str]:
    """A journal on a new SQLite file, and one conversation in it."""
    db = await open_database(f"sqlite+aiosqlite:///{path}")
    user = await AccountStore(db).get_or_create("bench")
    cid = (await ConversationStore(db).create(user.id, "bench")).id
    return db, Journal(EventStore(db)), cid


async def agent_loop(data: Path, steps: int) -> list[float]:
    """Seconds per step of a whole run, journal and all (`data`: an empty directory)."""
    db, journal, cid = await new_journal(data / "loop.db")
    provider = TimedProvider(script(steps))
    env = RunEnv(
        journal=journal,
        provider=provider,
        tools={"noop": NoopTool()},
        sandbox=no_sandbox,
        # A run's hooks as the server gives them, approvals aside (they need an owner).
        hooks=[
            SystemPrompt(SYSTEM_PROMPT),
            PreviewOpened(),
            LoopGuard(),
            BudgetHook(Budget(steps=steps + 5)),
            Compactor(provider, CompactionPolicy(window=10_000_000), Pricing()),
        ],
    )
    with journal.subscribe(cid) as feed:
        run = AgentRun(env, cid, "r_bench", ModelContext(), feed)
        status = await run.execute()
    assert status == "completed", status
    await db.close()
    return step_seconds(provider.calls)


async def commit_floor(data: Path, steps: int) -> list[float]:
    """Seconds per step of the step's two journal appends alone (`data`: an empty directory),
    each the shape the loop writes: three events before the tool, one after it."""
    db, journal, cid = await new_journal(data / "floor.db")
    answer = ev.AssistantMessage(
        content="", thinking="", tool_calls=[ev.ToolCall(id="c", name="noop", arguments={})]
    )
    before_tool = [
        ev.make(answer, "r"),
        ev.make(ev.UsageReported(prompt_tokens=1, completion_tokens=1), "r"),
        ev.make(
            ev.ToolStarted(
                call_id="c", name="noop", arguments={}, kind=ev.ToolKind(**NoopTool.kind.as_event())
            ),
            "r",
        ),
    ]
    after_tool = ev.make(ev.ToolFinished(call_id="c", is_error=False, output="ok"), "r")
    seconds = []
    for _ in range(steps):
        started = time.perf_counter()
        await journal.append(cid, *before_tool)
        await journal.append(cid, after_tool)
        seconds.append(time.perf_counter() - started)
    await db.close()
    return seconds[-LAST_STEPS:]


async def main() -> None:
    # Rounds interleave the run lengths, so a busy spell of the machine falls on all of them
    # alike; medians of step durations, so its pauses do not count.
    bare: dict[int, list[float]] = {steps: [] for steps in STEP_COUNTS}
    floor: list[float] = []
    agent: dict[int, list[float]] = {steps: [] for steps in STEP_COUNTS}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(ROUNDS):
            for steps in STEP_COUNTS:
                for i in range(max(1, STEPS_MEASURED // min(steps, LAST_STEPS) // ROUNDS)):
                    bare[steps] += await bare_loop(steps)
                    folder = Path(tmp) / f"{steps}-{round_}-{i}"
                    folder.mkdir()
                    agent[steps] += await agent_loop(folder, steps)
                    floor += await commit_floor(folder, min(steps, LAST_STEPS))
    figures: dict[int, float] = {}
    for steps in STEP_COUNTS:
        base, step = p50(bare[steps]), p50(agent[steps])
        figures[steps] = (step - base) * 1000
        print(
            f"  {steps:>5} steps: {step * 1000:.3f} ms per step, bare {base * 1000:.3f} ms, "
            f"overhead {figures[steps]:.3f} ms",
            flush=True,
        )
    first, last = STEP_COUNTS[0], STEP_COUNTS[-1]
    commits = p50(floor) * 1000
    print(
        f"  of which the step's two journal commits, measured alone: {commits:.3f} ms; "
        f"the loop's own work at {last} steps: {figures[last] - commits:.3f} ms",
        flush=True,
    )
    report(
        f"agent loop overhead per step, {last} steps",
        figures[last],
        "ms",
        f"the same at {first} steps",
        figures[first],
        "ratio <= 1.5 (flat), overhead <= 1 ms",
    )
    report(
        f"agent loop step overhead at {last} steps, against its two journal commits",
        figures[last],
        "ms",
        "the step's two journal commits alone",
        commits,
        "the loop's own work <= 1 ms beyond them",
    )


if __name__ == "__main__":
    asyncio.run(main())
