"""Plan mode (DESIGN §9): a run in `plan` mode reads only, then proposes its plan and waits.

The run's tools are judged in `plan` mode (read-only, behind the sandbox's read-only wall,
as `read_only` is: approvals.policy). When the model answers without a tool call, the plan
is its latest `todo` checklist (empty when it kept none: its answer is then the plan) and
`plan.proposed {plan_id, items}` is journaled; the run waits, like an approval does, for
`POST …/plans/{plan_id}`. Approve: the run goes on in the chosen mode with the plan, as the
owner left it, in its context (a steering `user.message`, so a replay rebuilds it); reject:
the run ends. An interrupt, or a server restart (which repairs the run like one waiting for
an approval), ends the wait; a decision after that is 409.
"""

from __future__ import annotations

import time
from typing import Any

from burrow.runs.journal import events as ev
from burrow.runs.loop.hooks.approvals import ApprovalGate
from burrow.runs.loop.hooks.base import Call, Hook, Outcome, Run
from burrow.store.records import NewEvent

# The mode an approved plan goes on in when the owner names none and the conversation
# itself is in plan mode (its mode before is not kept): ask, the default.
DEFAULT_AFTER_PLAN = "ask"


def plan_message(items: list[dict[str, Any]]) -> str:
    steps = "\n".join(f"- [{'x' if i['done'] else ' '}] {i['text']}" for i in items)
    return (
        "The user approved the plan"
        + (f":\n{steps}\n" if steps else ". ")
        + "Carry it out now, ticking its steps with the todo tool as you finish them."
    )


class PlanMode(Hook):
    def __init__(self, gate: ApprovalGate) -> None:
        self.gate = gate
        self._items: list[dict[str, Any]] = []  # the latest checklist of the run
        self._open: str | None = None  # plan_id while waiting for the owner

    async def after_tool_call(self, run: Run, call: Call, outcome: Outcome) -> None:
        items = outcome.result.extra.get("todo")
        if isinstance(items, list) and not outcome.result.is_error:
            self._items = items

    async def before_end(self, run: Run) -> bool:
        if await self.gate.mode_for(run.cid, run.run_id) != "plan":
            return False
        plan_id = ev.plan_id_of(run.run_id)
        answer = self.gate.wait_plan(run.cid, plan_id)
        self._open = plan_id
        items = [ev.PlanItem(text=i["text"], done=i["done"]) for i in self._items]
        await run.emit(ev.make(ev.PlanProposed(plan_id=plan_id, items=items), run.run_id))
        asked = time.monotonic()
        try:
            decision = await answer
        finally:  # an interrupt ends the wait too
            run.tally.approval_wait_seconds += time.monotonic() - asked
            self._open = None
            self.gate.forget_plan(plan_id)
        if not decision.approve:
            return False
        if decision.items is not None:
            self._items = decision.items
        conversation_mode = await self.gate.mode_for(run.cid)
        mode = decision.mode or (
            DEFAULT_AFTER_PLAN if conversation_mode == "plan" else conversation_mode
        )
        self.gate.set_run_mode(run.run_id, mode)
        if decision.items is not None:
            edited = [ev.PlanItem(text=i["text"], done=i["done"]) for i in self._items]
            await run.emit(ev.make(ev.PlanUpdated(plan_id=plan_id, items=edited), run.run_id))
        message = ev.UserMessage(content=plan_message(self._items), steering=True)
        await run.emit(ev.make(message, run.run_id))
        return True

    async def close(self, run: Run) -> list[NewEvent]:
        if self._open is not None:
            self.gate.forget_plan(self._open)
            self._open = None
        self.gate.set_run_mode(run.run_id, None)
        return []
