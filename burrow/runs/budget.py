"""Per-run budgets: tokens, cost, model calls (steps) and tool seconds.

Each run gets a `Budget` (the server's limits from the environment today; a conversation's
own budget once it can be stored) and checks it before every model call and after every
tool. A hit ends the run `budget_exceeded`, saying which limit; a new run starts afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from burrow.runs.hooks import Call, Hook, Outcome, Run, RunStop, Tally

BudgetKind = Literal["tokens", "cost", "steps", "tool_seconds"]

SETTINGS: dict[BudgetKind, str] = {  # where the server's limit comes from, for the message
    "tokens": "BURROW_RUN_MAX_TOKENS",
    "cost": "BURROW_RUN_MAX_COST",
    "steps": "BURROW_RUN_MAX_STEPS",
    "tool_seconds": "BURROW_RUN_MAX_TOOL_SECONDS",
}
UNITS: dict[BudgetKind, str] = {
    "tokens": "tokens",
    "cost": "dollars",
    "steps": "model calls",
    "tool_seconds": "seconds of tool time",
}


@dataclass(frozen=True)
class Budget:
    """The limits of one run; None is no limit."""

    tokens: int | None = None  # prompt + completion tokens
    cost: float | None = None  # dollars, priced by the run's Pricing
    steps: int | None = 50  # model calls
    tool_seconds: float | None = None  # time tools ran (approval waits excluded)


class BudgetExceeded(RunStop):
    def __init__(self, kind: BudgetKind, limit: float, used: float) -> None:
        super().__init__(
            "budget_exceeded",
            f"Stopped: this run used {used:g} of its {limit:g} {UNITS[kind]} "
            f"(the {kind} budget, {SETTINGS[kind]}). Raise the limit, or send a message "
            "to continue in a new run with a fresh budget.",
            budget={"kind": kind, "limit": limit, "used": used},
        )
        self.kind = kind


def exceeded(budget: Budget, tally: Tally) -> BudgetExceeded | None:
    """The first limit `tally` has reached, if any."""
    used: dict[BudgetKind, float] = {
        "tokens": tally.tokens,
        "cost": round(tally.cost, 6),
        "steps": tally.steps,
        "tool_seconds": round(tally.tool_seconds, 3),
    }
    limits: dict[BudgetKind, float | None] = {
        "tokens": budget.tokens,
        "cost": budget.cost,
        "steps": budget.steps,
        "tool_seconds": budget.tool_seconds,
    }
    for kind, limit in limits.items():
        if limit is not None and used[kind] >= limit:
            return BudgetExceeded(kind, limit, used[kind])
    return None


class BudgetHook(Hook):
    """Stops the run when it reaches a limit of its `Budget`."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def _check(self, run: Run) -> None:
        hit = exceeded(self.budget, run.tally)
        if hit is not None:
            raise hit

    async def before_model_call(self, run: Run) -> None:
        self._check(run)

    async def after_tool_call(self, run: Run, call: Call, outcome: Outcome) -> None:
        self._check(run)
