"""Run tasks against a server, several at once, and measure each from its journal."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from burrow.evals.client import SOLUTION_PATH, BurrowClient, EvalError
from burrow.evals.task import Task

MODEL_OUTPUT = {"assistant.thinking.delta", "assistant.text.delta", "tool.started"}
MODEL, ORACLE = "model", "oracle"  # who does the task: the server's model, or its solution
AGENTS = (MODEL, ORACLE)
BUILD_TIMEOUT = 1800.0  # an environment's build, before the task's own clock starts


@dataclass(frozen=True)
class TaskResult:
    name: str
    status: str  # the run's: completed, failed, canceled, budget_exceeded; "error" if no run
    passed: bool  # the check exited 0
    met_expectation: bool  # status and passed as the task's [expect] says
    tokens: int  # prompt + completion
    cost: float
    wall_s: float  # prompt sent -> run.finished
    ttft_s: float | None  # run.started -> the model's first output
    tool_s: float  # summed tool durations
    model_calls: int
    tool_calls: int
    compactions: int
    error: str | None = None
    check_output: str = ""
    trial: int = 1  # which of the task's --trials samples this is
    prompt_tokens: int = 0  # of which read from the provider's prompt cache:
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    completion_tokens: int = 0

    @property
    def errored(self) -> bool:
        """The attempt ended in an error, not in a judged result: the run failed (the
        model server erred, or a guard stopped it) or the eval could not run it at all."""
        return self.status in ("error", "failed")

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "errored": self.errored}


async def run_suite(
    client: BurrowClient,
    tasks: Sequence[Task],
    parallel: int = 4,
    trials: int = 1,
    agent: str = MODEL,
) -> list[TaskResult]:
    """Every task's results, `trials` samples each (each in a conversation of its own), in
    the tasks' order and then the trials'; `parallel` attempts at once. `agent` oracle runs
    each task's own solution instead of the model."""
    gate = asyncio.Semaphore(max(1, parallel))
    attempt = run_oracle if agent == ORACLE else run_task

    async def one(task: Task, trial: int) -> TaskResult:
        async with gate:
            return replace(await attempt(client, task), trial=trial)

    attempts = [one(t, k) for t in tasks for k in range(1, trials + 1)]
    return list(await asyncio.gather(*attempts))


async def run_task(client: BurrowClient, task: Task) -> TaskResult:
    started = time.monotonic()
    try:
        cid = await _prepare(client, task)
        started = time.monotonic()
        run_id = await client.send(cid, task.prompt)
        events = await client.wait_run(cid, run_id, task.timeout)
        wall = time.monotonic() - started
        code, output = await _check(client, cid, task)
    except (EvalError, OSError, TimeoutError) as exc:
        return _failed(task, str(exc) or type(exc).__name__, time.monotonic() - started)
    return measure(task, events, wall, code == 0, output)


async def run_oracle(client: BurrowClient, task: Task) -> TaskResult:
    """The task done by its own solution, through a terminal in its sandbox, then checked
    as a model's work would be: a task whose oracle fails has a broken environment, check
    or solution, and says which."""
    started = time.monotonic()
    if task.solution is None:
        return _failed(task, "the task has no solution/solve.sh for --agent oracle", 0.0)
    try:
        cid = await _prepare(client, task)
        started = time.monotonic()
        for path, data in task.solution_files:
            await client.upload(cid, path, data)
        solved, solving = await client.run_script(cid, SOLUTION_PATH, task.solution, task.timeout)
        wall = time.monotonic() - started
        code, output = await _check(client, cid, task)
    except (EvalError, OSError, TimeoutError) as exc:
        return _failed(task, str(exc) or type(exc).__name__, time.monotonic() - started)
    status = "completed" if solved == 0 else "failed"
    passed = code == 0
    return replace(
        _failed(task, None if solved == 0 else f"solve.sh exited {solved}: {solving[-500:]}", wall),
        status=status,
        passed=passed,
        met_expectation=status == "completed" and passed,
        check_output=output[-2000:],
    )


async def _prepare(client: BurrowClient, task: Task) -> str:
    """The task's conversation, on its environment (built first), with its files."""
    environment = task.environment
    if environment is not None:
        await client.ensure_environment(environment.view(), BUILD_TIMEOUT)
    cid = await client.create_conversation(
        f"eval: {task.name}", task.approval_mode, environment.name if environment else None
    )
    if task.budget:
        await client.set_budget(cid, task.budget)
    for path, data in task.setup_files():
        await client.upload(cid, path, data)
    return cid


async def _check(client: BurrowClient, cid: str, task: Task) -> tuple[int, str]:
    for path, data in task.check_files:
        await client.upload(cid, path, data)
    return await client.run_check(cid, task.check, task.check_timeout)


def measure(
    task: Task, events: Sequence[dict[str, Any]], wall: float, passed: bool, output: str
) -> TaskResult:
    """A task's figures from its run's events (the journal is the record, not the client's
    clock, except for wall time, which is what the person waited)."""
    finished = next(e for e in events if e["type"] == "run.finished")["data"]
    usage = finished.get("usage") or {}
    start = next((_ts(e) for e in events if e["type"] == "run.started"), None)
    first = next((_ts(e) for e in events if e["type"] in MODEL_OUTPUT), None)
    status = str(finished["status"])
    compactions = sum(1 for e in events if e["type"] == "context.compacted")
    expect = task.expect
    return TaskResult(
        name=task.name,
        status=status,
        passed=passed,
        met_expectation=(status, passed) == (expect.status, expect.passed)
        and (compactions > 0 or not expect.compacted),
        tokens=int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0)),
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        cache_read_tokens=int(usage.get("cache_read_tokens", 0)),
        cache_write_tokens=int(usage.get("cache_write_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        cost=float(usage.get("cost", 0.0)),
        wall_s=round(wall, 3),
        ttft_s=round(first - start, 3) if start is not None and first is not None else None,
        tool_s=round(
            sum(e["data"].get("duration_ms", 0) for e in events if e["type"] == "tool.finished")
            / 1000,
            3,
        ),
        model_calls=sum(1 for e in events if e["type"] == "usage"),
        tool_calls=sum(1 for e in events if e["type"] == "tool.started"),
        compactions=compactions,
        error=finished.get("error"),
        check_output=output[-2000:],
    )


def _failed(task: Task, error: str | None, wall: float) -> TaskResult:
    return TaskResult(
        name=task.name,
        status="error",
        passed=False,
        met_expectation=False,
        tokens=0,
        cost=0.0,
        wall_s=round(wall, 3),
        ttft_s=None,
        tool_s=0.0,
        model_calls=0,
        tool_calls=0,
        compactions=0,
        error=error,
    )


def _ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()
