"""Agent-loop overhead per step (DESIGN.md §7: <= 1 ms, flat from 10 to 1,000 steps),
scripted model and a no-op tool.

Baseline, in the same run: the same scripted answers consumed and the same no-op tool
called by a bare loop that journals nothing. The difference is what the loop adds: the
journal writes, context projection, hooks and event fan-out of every step. It is measured
for runs of 10, 100 and 1,000 steps; the ratio of the 1,000-step figure to the 10-step one
shows whether a step gets dearer as the conversation grows.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import report
from burrow.llm.base import Message, ScriptedTurn, ToolSpec
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.context import ModelContext
from burrow.runs.journal import Journal
from burrow.runs.loop import AgentRun, LoopConfig, RunEnv
from burrow.sandbox.backend import Sandbox
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import open_database
from burrow.store.events import EventStore
from burrow.tools.base import ToolContext, ToolResult

STEP_COUNTS = (10, 100, 1000)
REPEATS = 300  # steps measured per figure at least, so short runs are not noise


class NoopTool:
    spec = ToolSpec("noop", "Does nothing.", {"type": "object", "properties": {}})

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(output="ok")


def script(steps: int) -> list[ScriptedTurn]:
    return [ScriptedTurn(tool_calls=[("noop", {})]) for _ in range(steps)] + [
        ScriptedTurn(text="done")
    ]


async def no_sandbox() -> Sandbox:
    raise AssertionError("the no-op tool never asks for the sandbox")


async def bare_loop(steps: int) -> float:
    """Seconds per step of the model and the tool alone."""
    provider, tool = ScriptedProvider(script(steps)), NoopTool()
    messages = [Message(role="user", content="go")]
    start = time.perf_counter()
    for _ in range(steps + 1):
        async for _item in provider.stream(messages, [tool.spec]):
            pass
        await tool.run({}, ToolContext(sandbox=no_sandbox, call_id="c"))
    return (time.perf_counter() - start) / (steps + 1)


async def agent_loop(data: Path, steps: int) -> float:
    """Seconds per step of a whole run, journal and all."""
    data.mkdir()
    db = await open_database(f"sqlite+aiosqlite:///{data / 'loop.db'}")
    user = await AccountStore(db).get_or_create("bench")
    cid = (await ConversationStore(db).create(user.id, "bench")).id
    journal = Journal(EventStore(db))
    env = RunEnv(
        journal=journal,
        provider=ScriptedProvider(script(steps)),
        tools={"noop": NoopTool()},
        sandbox=no_sandbox,
        config=LoopConfig(max_steps=steps + 5),
    )
    with journal.subscribe(cid) as feed:
        run = AgentRun(env, cid, "r_bench", ModelContext(), feed)
        start = time.perf_counter()
        status = await run.execute()
        elapsed = time.perf_counter() - start
    assert status == "completed", status
    await db.close()
    return elapsed / (steps + 1)


async def overhead(tmp: Path, steps: int) -> float:
    """Milliseconds the loop adds per step: the best of several runs, against the best bare one."""
    repeats = max(3, REPEATS // steps)
    base = min([await bare_loop(steps) for _ in range(repeats)])
    step = min([await agent_loop(tmp / f"{steps}-{i}", steps) for i in range(repeats)])
    print(
        f"  {steps:>5} steps: {step * 1000:.3f} ms per step, bare {base * 1000:.3f} ms, "
        f"overhead {(step - base) * 1000:.3f} ms",
        flush=True,
    )
    return (step - base) * 1000


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        figures = {steps: await overhead(Path(tmp), steps) for steps in STEP_COUNTS}
    first, last = STEP_COUNTS[0], STEP_COUNTS[-1]
    report(
        f"agent loop overhead per step, {last} steps",
        figures[last],
        "ms",
        f"the same at {first} steps",
        figures[first],
        "ratio <= 1.5 (flat), overhead <= 1 ms",
    )


if __name__ == "__main__":
    asyncio.run(main())
