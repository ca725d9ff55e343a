"""An eval suite on disk: one folder per task.

    <task>/task.toml   prompt, timeout, approval_mode, budget, [expect] (status, passed)
    <task>/setup/      files put into the workspace before the prompt (optional)
    <task>/check.sh    run in the sandbox in /workspace after the run: exit 0 = passed
    <task>/script.json the scripted model's turns for this task (the offline run in CI)
    <task>/solution/solve.sh  what `--agent oracle` runs instead of the model (optional)

A folder of Harbor-format tasks (Terminal-Bench's) loads too: harbor.py reads each into the
same Task. The check is uploaded only after the run, so the agent cannot read it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from burrow.evals.harbor import is_harbor_task, load_harbor_task
from burrow.evals.task import Expectation, SuiteError, Task

SUITE = Path(__file__).parent / "suite"
HARBOR_SUITE = Path(__file__).parent / "harbor_suite"  # Terminal-Bench-style tasks of ours
BUDGET_KINDS = {"tokens", "cost", "steps", "tool_seconds", "wall_seconds", "total_cost"}
APPROVAL_MODES = {"ask", "auto", "read_only"}


def load_suite(folder: Path = SUITE, only: Sequence[str] = ()) -> list[Task]:
    """The suite's tasks in name order (or only those named), each checked for sense."""
    if not folder.is_dir():
        raise SuiteError(f"No eval suite at {folder}")
    tasks = [
        load_harbor_task(t) if is_harbor_task(t) else load_task(t)
        for t in sorted(folder.iterdir())
        if (t / "task.toml").is_file()
    ]
    if only:
        unknown = set(only) - {t.name for t in tasks}
        if unknown:
            raise SuiteError(f"No task named {', '.join(sorted(unknown))} in {folder}")
        tasks = [t for t in tasks if t.name in only]
    prompts = [t.prompt for t in tasks]
    if len(set(prompts)) != len(prompts):
        raise SuiteError(
            "Two tasks have the same prompt: the scripted model tells them apart by it"
        )
    return tasks


def load_task(folder: Path) -> Task:
    where = folder / "task.toml"
    try:
        spec = tomllib.loads(where.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{where}: {exc}") from exc
    prompt = spec.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise SuiteError(f"{where}: needs a prompt")
    if not (folder / "check.sh").is_file():
        raise SuiteError(f"{folder}: needs a check.sh")
    budget = spec.get("budget", {})
    if not isinstance(budget, dict) or not set(budget) <= BUDGET_KINDS:
        raise SuiteError(f"{where}: budget keys are {sorted(BUDGET_KINDS)}")
    mode = spec.get("approval_mode", "auto")
    if mode not in APPROVAL_MODES:
        raise SuiteError(f"{where}: approval_mode is one of {sorted(APPROVAL_MODES)}")
    expect = spec.get("expect", {})
    solve = folder / "solution" / "solve.sh"
    return Task(
        name=folder.name,
        folder=folder,
        prompt=prompt.strip(),
        check=(folder / "check.sh").read_bytes(),
        solution=solve.read_bytes() if solve.is_file() else None,
        timeout=float(spec.get("timeout", 300)),
        approval_mode=mode,
        budget={k: float(v) for k, v in budget.items()},
        expect=Expectation(
            status=str(expect.get("status", "completed")),
            passed=bool(expect.get("passed", True)),
            compacted=bool(expect.get("compacted", False)),
        ),
    )


def routed_script(tasks: Sequence[Task]) -> dict[str, Any]:
    """One scripted-model file for the whole suite (burrow/llm/scripted.py RoutedScripts)."""
    return {"conversations": [{"prompt": t.prompt, "turns": t.script()} for t in tasks]}
