"""Budgets: per run (tokens, cost, model calls, tool seconds, wall seconds) and per
conversation (total cost).

Each run gets a `Budget`: the server's limits from the environment, overridden field by
field by the conversation's own `budget`. It is checked before every model call and after
every tool. `wall_seconds` is the run's elapsed time less its approval waits, so it is
checked at those seams too: a single model call or tool past it finishes first (each is
bounded by its own timeout), then the run stops. A hit ends the run `budget_exceeded`,
saying which limit; a new run starts afresh, except `total_cost`, which counts everything
the conversation has spent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from burrow.runs.journal.events import BudgetHit, BudgetKind
from burrow.runs.loop.hooks.base import Call, Hook, Outcome, Run, RunStop, Tally

KINDS: tuple[BudgetKind, ...] = (
    "tokens",
    "cost",
    "steps",
    "tool_seconds",
    "wall_seconds",
    "total_cost",
)

SETTINGS: dict[BudgetKind, str] = {  # where the server's limit comes from, for the message
    "tokens": "BURROW_RUN_MAX_TOKENS",
    "cost": "BURROW_RUN_MAX_COST",
    "steps": "BURROW_RUN_MAX_STEPS",
    "tool_seconds": "BURROW_RUN_MAX_TOOL_SECONDS",
    "wall_seconds": "BURROW_RUN_MAX_WALL_SECONDS",
}
UNITS: dict[BudgetKind, str] = {
    "tokens": "tokens",
    "cost": "dollars",
    "steps": "model calls",
    "tool_seconds": "seconds of tool time",
    "wall_seconds": "seconds of wall time",
    "total_cost": "dollars",
}


@dataclass(frozen=True)
class Budget:
    """The limits of one run; None is no limit."""

    tokens: int | None = None  # prompt + completion tokens
    cost: float | None = None  # dollars, priced by the run's Pricing
    steps: int | None = 50  # model calls
    tool_seconds: float | None = None  # time tools ran (approval waits excluded)
    wall_seconds: float | None = None  # time the run took (approval waits excluded)
    total_cost: float | None = None  # dollars the whole conversation may spend, all runs
    own: frozenset[str] = frozenset()  # the limits the conversation set (for the message)

    def overridden(self, overrides: dict[str, float]) -> Budget:
        """These limits with the conversation's `overrides` in place of the server's."""
        known = {f.name for f in fields(self)} - {"own"}
        chosen = {k: v for k, v in overrides.items() if k in known}
        for kind in ("tokens", "steps"):
            if chosen.get(kind) is not None:
                chosen[kind] = int(chosen[kind])
        return replace(self, **chosen, own=frozenset(chosen))  # type: ignore[arg-type]


class BudgetExceeded(RunStop):
    def __init__(self, kind: BudgetKind, limit: float, used: float, *, own: bool) -> None:
        if kind == "total_cost":
            message = (
                f"Stopped: this conversation has spent {used:g} of its {limit:g} dollars "
                "(the total_cost budget). Raise budget.total_cost in the conversation's "
                "settings, then send a message to continue."
            )
        else:
            source = "set for this conversation" if own else SETTINGS[kind]
            message = (
                f"Stopped: this run used {used:g} of its {limit:g} {UNITS[kind]} "
                f"(the {kind} budget, {source}). Raise the limit, or send a message "
                "to continue in a new run with a fresh budget."
            )
        super().__init__(
            "budget_exceeded", message, budget=BudgetHit(kind=kind, limit=limit, used=used)
        )
        self.kind = kind


def exceeded(
    budget: Budget, tally: Tally, spent_before: float = 0.0, wall_seconds: float = 0.0
) -> BudgetExceeded | None:
    """The first limit `tally` has reached, if any; `spent_before`: the conversation's
    cost before this run, for `total_cost`; `wall_seconds`: the run's time so far."""
    used: dict[BudgetKind, float] = {
        "tokens": tally.usage.tokens,
        "cost": round(tally.usage.cost, 6),
        "steps": tally.steps,
        "tool_seconds": round(tally.tool_seconds, 3),
        "wall_seconds": round(wall_seconds, 3),
        "total_cost": round(spent_before + tally.usage.cost, 6),
    }
    for kind in KINDS:
        limit = getattr(budget, kind)
        if limit is not None and used[kind] >= limit:
            return BudgetExceeded(kind, limit, used[kind], own=kind in budget.own)
    return None


class BudgetHook(Hook):
    """Stops the run when it reaches a limit of its `Budget`. `budget` may be replaced
    while the run goes (a PATCH of the conversation's budget): the next check uses it."""

    def __init__(
        self,
        budget: Budget,
        spent_before: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.budget = budget
        self.spent_before = spent_before
        self._clock = clock
        self._started = clock()  # one hook per run, made as the run is assembled

    def wall_seconds(self, tally: Tally) -> float:
        return max(0.0, self._clock() - self._started - tally.approval_wait_seconds)

    def _check(self, run: Run) -> None:
        hit = exceeded(self.budget, run.tally, self.spent_before, self.wall_seconds(run.tally))
        if hit is not None:
            raise hit

    async def before_model_call(self, run: Run) -> None:
        self._check(run)

    async def after_tool_call(self, run: Run, call: Call, outcome: Outcome) -> None:
        self._check(run)
