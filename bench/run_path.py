"""The run's own path, in process (no HTTP), on the services `burrow serve` builds: a real
SQLite journal, the local sandbox, every hook, a scripted model that answers at once.

- run assembly: from `send` (the message and run.started committed) to the first model
  request, each run on a conversation whose sandbox is up (DESIGN.md §7 / issue 22: ≤ 5 ms);
  baseline: one journal commit of one event, the unit a run start is made of.
- the path around a sandbox call: one step of a run whose model asks for `pwd && ls`
  (model request -> the tool through approvals, secrets, masking, the sandbox, the journal
  -> next model request), minus nothing; baseline: the same bash tool called on the same
  sandbox directly plus the scripted model's own turn (target: ≤ +3 ms).

    .venv/bin/python bench/run_path.py [--runs 30] [--steps 60]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import BENCH_PASSWORD, p50, report
from bench.loop_step import TimedProvider
from burrow.config import Settings
from burrow.llm.base import Message, ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal import events as ev
from burrow.runs.journal.journal import Journal
from burrow.sandbox.backend import Sandbox
from burrow.services import open_services
from burrow.tools.base import ToolContext
from burrow.tools.bash import BashTool

COMMAND = "pwd && ls"


async def finished(journal: Journal, cid: str, after: int) -> None:
    async for batch in journal.follow(cid, after):
        if any(e.type == "run.finished" for e in batch):
            return


async def measure(data: Path, runs: int, steps: int) -> dict[str, list[float]]:
    bash_turn = ScriptedTurn(tool_calls=[("bash", {"command": COMMAND})])
    turns = [bash_turn, ScriptedTurn(text="ok")]  # warm-up run: the sandbox boots
    turns += [ScriptedTurn(text="ok")] * runs  # assembly runs
    turns += [bash_turn] * steps + [ScriptedTurn(text="done")]  # one long run of bash calls
    provider = TimedProvider(turns)
    settings = Settings(data_dir=data, admin_password=BENCH_PASSWORD, port=1)
    svc = await open_services(settings, provider=lambda: provider)
    try:
        cid = (await svc.conversations.create(svc.owner.id, "bench", approval_mode="auto")).id
        run = svc.runtime
        _, seq = await run.send(cid, "warm up")
        await finished(svc.journal, cid, seq)
        assembly = []
        for _ in range(runs):
            provider.calls.clear()
            started = time.perf_counter()
            _, seq = await run.send(cid, "hi")
            await finished(svc.journal, cid, seq)
            assembly.append((provider.calls[0] - started) * 1000)
        provider.calls.clear()
        _, seq = await run.send(cid, "go")
        await finished(svc.journal, cid, seq)
        step = [(b - a) * 1000 for a, b in itertools.pairwise(provider.calls)][5:]
        commit = []
        for _ in range(runs):
            started = time.perf_counter()
            await svc.journal.append(cid, ev.make(ev.McpWarning(server="bench", message="")))
            commit.append((time.perf_counter() - started) * 1000)
        sandbox = await svc.runtime.sandboxes.commands(cid)
        tool, bare = BashTool(), []
        for _ in range(steps):
            started = time.perf_counter()
            model = ScriptedProvider([bash_turn])
            async for _item in model.stream([Message(role="user", content="go")], [tool.spec]):
                pass
            await tool.run(
                {"command": COMMAND}, ToolContext(sandbox=lambda: _ready(sandbox), call_id="c")
            )
            bare.append((time.perf_counter() - started) * 1000)
        return {"assembly": assembly, "commit": commit, "step": step, "bare": bare}
    finally:
        await svc.close()


async def _ready(sandbox: Sandbox) -> Sandbox:
    return sandbox


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        found = await measure(Path(tmp), args.runs, args.steps)
    report(
        f"run assembly, send to first model request (p50, n={args.runs})",
        p50(found["assembly"]),
        "ms",
        "one journal commit of one event, p50",
        p50(found["commit"]),
        "<= 5 ms",
    )
    report(
        f"a bash step of a run, model request to the next (p50, n={len(found['step'])})",
        p50(found["step"]),
        "ms",
        "the bash tool on the same sandbox + the model's turn, p50",
        p50(found["bare"]),
        "+3 ms",
    )


if __name__ == "__main__":
    asyncio.run(main())
