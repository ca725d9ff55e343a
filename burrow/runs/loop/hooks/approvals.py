"""The approval gate: a policy maps each call's risk to allow, ask or deny, and an asked
call waits for its owner's answer. One place owns the waiting: nothing else answers.
`Approvals` is the gate as the agent loop's hook before each tool call.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from typing import Any, Literal

from burrow.runs.journal import events as ev
from burrow.runs.journal.events import Decision, Risk
from burrow.runs.loop.hooks.base import Call, Hook, Run
from burrow.runs.loop.hooks.risk import Assessment, assess
from burrow.store.approvals import ApprovalStore, arguments_digest
from burrow.store.conversations import ConversationStore
from burrow.store.records import NewEvent
from burrow.tools.base import ToolKind

Mode = Literal["ask", "auto", "read_only", "plan"]
MODES: tuple[Mode, ...] = ("ask", "auto", "read_only", "plan")
READ_ONLY_MODES = ("read_only", "plan")  # behind the sandbox's read-only wall


@dataclass(frozen=True)
class PlanDecision:
    """The owner's answer to `plan.proposed`: approve (with the plan, maybe edited, and the
    mode the run goes on in) or reject."""

    approve: bool
    items: list[dict[str, Any]] | None = None
    mode: str | None = None


@dataclass(frozen=True)
class Verdict:
    action: Literal["allow", "ask", "deny"]
    risk: Risk
    reason: str
    read_only: bool = False  # an allowed call that must run behind the read-only wall


def policy(mode: str, assessment: Assessment) -> Verdict:
    """ask (default): ask for dangerous calls; auto: allow everything inside the sandbox;
    read_only: allow only calls that read. Clearly destructive calls are refused in all."""
    risk, reason = assessment.risk, assessment.reason
    if assessment.forbidden:
        return Verdict("deny", risk, f"Refused: {reason} Burrow never runs such a command.")
    if mode in READ_ONLY_MODES:
        if risk == "safe":  # a rating, not a wall: the sandbox enforces it too
            return Verdict("allow", risk, reason, read_only=True)
        if mode == "plan":
            return Verdict(
                "deny",
                risk,
                f"Refused: this run is in plan mode, which only reads ({reason}). Keep "
                "your plan with the todo tool and finish your answer; the user approves "
                "the plan before anything changes.",
            )
        return Verdict(
            "deny",
            risk,
            f"Refused: the conversation is read-only and this call changes things "
            f"({reason}). Switch the conversation to ask or auto mode to allow it.",
        )
    if mode == "auto" or risk != "dangerous":
        return Verdict("allow", risk, reason)
    return Verdict("ask", risk, reason)


class ApprovalGate:
    def __init__(
        self,
        store: ApprovalStore,
        conversations: ConversationStore,
        *,
        remember_modes: bool = True,
    ) -> None:
        self._store = store
        self._conversations = conversations
        self._waiting: dict[str, tuple[str, asyncio.Future[Decision]]] = {}
        # Modes read once per conversation; `mode_changed` keeps them current. With several
        # replicas a PATCH lands on any of them, so each review reads the row instead
        # (`remember_modes=False`: one primary-key read per tool call).
        self._modes: dict[str, str] = {}
        self._remember_modes = remember_modes
        # Runs nobody is watching (handed in over A2A): a call that would ask is refused
        # instead of waiting for an answer that will not come. Per process, like `_modes`.
        self._unattended: set[str] = set()
        # A run's own mode, over its conversation's: a message sent in plan mode, or the
        # mode an approved plan goes on in. Per process, like the futures it goes with.
        self._run_modes: dict[str, str] = {}
        # Plans waiting for the owner's decision: plan_id -> (cid, future).
        self._plans: dict[str, tuple[str, asyncio.Future[PlanDecision]]] = {}

    def set_run_mode(self, run_id: str, mode: str | None) -> None:
        """The mode of one run (None: its conversation's again)."""
        if mode is None:
            self._run_modes.pop(run_id, None)
        else:
            self._run_modes[run_id] = mode

    async def mode_for(self, cid: str, run_id: str | None = None) -> str:
        """The mode a call of `run_id` is judged in."""
        if run_id is not None and run_id in self._run_modes:
            return self._run_modes[run_id]
        return await self._mode(cid)

    def wait_plan(self, cid: str, plan_id: str) -> asyncio.Future[PlanDecision]:
        answer: asyncio.Future[PlanDecision] = asyncio.get_running_loop().create_future()
        self._plans[plan_id] = (cid, answer)
        return answer

    def plan_waiting(self, cid: str, plan_id: str) -> bool:
        waiting = self._plans.get(plan_id)
        return waiting is not None and waiting[0] == cid and not waiting[1].done()

    def decide_plan(self, cid: str, plan_id: str, decision: PlanDecision) -> bool:
        """The owner's decision on a proposed plan; False when no run of `cid` waits on it."""
        if not self.plan_waiting(cid, plan_id):
            return False
        _, answer = self._plans.pop(plan_id)
        answer.set_result(decision)
        return True

    def forget_plan(self, plan_id: str) -> None:
        self._plans.pop(plan_id, None)

    def unattended(self, run_id: str, on: bool = True) -> None:
        """Mark (or unmark) a run as having nobody to ask."""
        if on:
            self._unattended.add(run_id)
        else:
            self._unattended.discard(run_id)

    def is_unattended(self, run_id: str) -> bool:
        return run_id in self._unattended

    def mode_changed(self, cid: str, mode: str | None) -> None:
        """The conversation's mode changed (None: it was deleted)."""
        if mode is None or not self._remember_modes:
            self._modes.pop(cid, None)
        else:
            self._modes[cid] = mode

    async def _mode(self, cid: str) -> str:
        mode = self._modes.get(cid)
        if mode is None:
            conversation = await self._conversations.get(cid)
            mode = conversation.approval_mode if conversation else "ask"
            if self._remember_modes:
                self._modes[cid] = mode
        return mode

    async def review(
        self,
        cid: str,
        tool: str,
        arguments: dict[str, Any],
        kind: ToolKind | None = None,
        run_id: str | None = None,
    ) -> Verdict:
        verdict = policy(await self.mode_for(cid, run_id), assess(tool, arguments, kind))
        if verdict.action == "ask":
            grant = await self._store.grant_for(cid, tool, arguments_digest(arguments))
            if grant is not None:
                return Verdict(
                    "allow", verdict.risk, f"Allowed for this session ({grant.request_id})."
                )
        return verdict

    async def open(
        self, cid: str, call_id: str, tool: str, arguments: dict[str, Any], verdict: Verdict
    ) -> tuple[str, asyncio.Future[Decision]]:
        request_id = f"ap_{secrets.token_hex(8)}"
        await self._store.record_request(
            request_id,
            cid,
            call_id,
            tool,
            arguments_digest(arguments),
            verdict.risk,
            verdict.reason,
        )
        answer: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (cid, answer)
        return request_id, answer

    async def answer(self, cid: str, request_id: str, decision: Decision) -> bool:
        """The owner's answer. False when no call of `cid` waits on `request_id`."""
        waiting = self._waiting.get(request_id)
        if waiting is None or waiting[0] != cid or waiting[1].done():
            return False
        if await self._store.resolve(request_id, decision) is None:
            return False
        del self._waiting[request_id]
        waiting[1].set_result(decision)
        return True

    async def abandon(self, request_id: str) -> None:
        """The run stopped while waiting (interrupt): the request is recorded as denied."""
        self._waiting.pop(request_id, None)
        await self._store.resolve(request_id, "deny")


class Approvals(Hook):
    """Before each tool call: allow, refuse, or ask the owner and wait for the answer."""

    def __init__(self, gate: ApprovalGate) -> None:
        self.gate = gate
        self._open: str | None = None  # request_id while waiting for the owner

    async def before_tool_call(self, run: Run, call: Call) -> str | None:
        if call.tool is None or call.arguments is None:
            return None
        arguments = call.arguments
        verdict = await self.gate.review(run.cid, call.name, arguments, call.tool.kind, run.run_id)
        call.read_only = verdict.read_only
        if verdict.action == "allow":
            return None
        if verdict.action == "deny":
            return verdict.reason
        if self.gate.is_unattended(run.run_id):
            return (
                f"Refused: this run was handed in by another agent and nobody is here to "
                f"approve it ({verdict.reason}). The conversation's owner can run it "
                "themselves."
            )
        request_id, answer = await self.gate.open(run.cid, call.id, call.name, arguments, verdict)
        self._open = request_id
        await run.emit(
            ev.make(
                ev.ApprovalRequested(
                    request_id=request_id,
                    call_id=call.id,
                    tool=call.name,
                    arguments=arguments,
                    risk=verdict.risk,
                    reason=verdict.reason,
                ),
                run.run_id,
            )
        )
        asked = time.monotonic()
        try:
            decision = await answer
        finally:  # an interrupt ends the wait too
            run.tally.approval_wait_seconds += time.monotonic() - asked
        self._open = None
        await run.emit(
            ev.make(ev.ApprovalResolved(request_id=request_id, decision=decision), run.run_id)
        )
        return "Denied by the user." if decision == "deny" else None

    async def close(self, run: Run) -> list[NewEvent]:
        # Stopping while the owner was asked answers the question: no. (The run writes the
        # approval.resolved, as it pairs everything it left open.)
        if self._open is not None:
            request_id, self._open = self._open, None
            await self.gate.abandon(request_id)
        return []
