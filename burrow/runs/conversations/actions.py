"""What a person does to a run — send a message, interrupt, answer an approval — applied
by the replica that runs it.

With one process every action is the runtime's. With several replicas the run belongs to
whoever holds its lease (replicas.py); an action arriving elsewhere is written to
`run_commands` (store/commands.py keeps the table's older name), the owner is woken by a
NOTIFY, applies it with its own runtime (so steering, Stop and approvals behave exactly
as on one process) and writes the result back. If the owner dies first, its lease lapses
and the asker takes the action back and applies it itself: a message then starts a run
here (after the dead run is repaired), an interrupt finds nothing left to stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from burrow.runs.conversations.leases import RunElsewhere
from burrow.runs.conversations.runtime import Runtime
from burrow.runs.journal.events import Decision
from burrow.runs.loop.hooks.approvals import PlanDecision
from burrow.runs.workspace.quotas import RunQuotaExceeded
from burrow.store.commands import Command, CommandStore
from burrow.store.events import ConversationGone
from burrow.store.leases import LeaseStore

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # a waiting asker looks at the rows this often (a NOTIFY can be lost)
ROUTE_ATTEMPTS = 5  # a lease can move while a command travels: ask again, a few times


class OwnerActions:
    """Both sides of commands between replicas: asking an owner, and being asked."""

    def __init__(self, runtime: Runtime, store: CommandStore, leases: LeaseStore) -> None:
        self._runtime = runtime
        self._store = store
        self._leases = leases
        self.replica = store.replica
        self._answers: dict[str, asyncio.Future[None]] = {}
        self._applying: set[asyncio.Task[None]] = set()

    async def holder(self, cid: str) -> str | None:
        """Another replica whose live lease covers `cid` (None: none, or this one)."""
        holder = await self._leases.holder(cid)
        return None if holder == self.replica else holder

    async def ask(self, cid: str, target: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        """Have `target` apply the command; its result, or {"withdrawn": True} when the
        target lost the run first (the caller then applies it here)."""
        command_id = await self._store.post(cid, target, kind, body)
        try:
            while True:
                woken = asyncio.get_running_loop().create_future()
                self._answers[command_id] = woken
                try:
                    await asyncio.wait_for(woken, POLL_SECONDS)
                except TimeoutError:
                    pass
                result = await self._store.result(command_id)
                if result is not None:
                    await self._store.forget(command_id)
                    return result
                if await self._leases.holder(cid) != target and await self._store.withdraw(
                    command_id
                ):
                    return {"withdrawn": True}
        finally:
            self._answers.pop(command_id, None)

    def notified(self, payload: str) -> None:
        """A `burrow_commands` payload: "run <target> <id>" or "done <origin> <id>"."""
        verb, replica, command_id = payload.split(" ", 2)
        if replica != self.replica:
            return
        if verb == "done":
            woken = self._answers.get(command_id)
            if woken is not None and not woken.done():
                woken.set_result(None)
        elif verb == "run":
            self._apply_soon(command_id)

    def reconnected(self) -> None:
        """Notifications may have been missed: look at the rows again, both ways."""
        for woken in self._answers.values():
            if not woken.done():
                woken.set_result(None)

        async def pending() -> None:
            for command_id in await self._store.pending():
                self._apply_soon(command_id)

        self._spawn(pending())

    def _apply_soon(self, command_id: str) -> None:
        self._spawn(self._apply(command_id))

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._applying.add(task)
        task.add_done_callback(self._applying.discard)

    async def _apply(self, command_id: str) -> None:
        try:
            command = await self._store.take(command_id)
            if command is None:
                return  # answered already, or withdrawn by its asker
            await self._store.answer(command, await self._execute(command))
        except Exception:
            log.exception("command %s could not be applied", command_id)

    async def _execute(self, command: Command) -> dict[str, Any]:
        cid, body, runtime = command.conversation_id, command.body, self._runtime
        if command.kind == "message":
            try:
                run_id, seq = await runtime.send(
                    cid, body["content"], body.get("attachments", ()), body.get("approval_mode")
                )
            except RunElsewhere as exc:
                return {"elsewhere": exc.holder}
            except RunQuotaExceeded as exc:
                return {"quota": exc.limit}
            except ConversationGone:
                return {"gone": True}
            return {"run_id": run_id, "seq": seq}
        if command.kind == "interrupt":
            stopped = runtime.active_run(cid)
            await runtime.interrupt(cid)
            return {"run_id": stopped}
        if command.kind == "approval":
            answered = await runtime.approvals.answer(cid, body["request_id"], body["decision"])
            return {"answered": answered}
        if command.kind == "plan":
            decision = PlanDecision(body["approve"], body.get("items"), body.get("mode"))
            return {"decided": runtime.approvals.decide_plan(cid, body["plan_id"], decision)}
        return {"unknown": command.kind}

    async def close(self) -> None:
        for task in list(self._applying):
            task.cancel()
        if self._applying:
            await asyncio.wait(list(self._applying))


class Actions:
    """The API's entry to a run: applied here, or sent to the replica that owns the run."""

    def __init__(self, runtime: Runtime, owners: OwnerActions | None = None) -> None:
        self._runtime = runtime
        self._owners = owners

    async def send(
        self,
        cid: str,
        content: str,
        attachments: Sequence[str] = (),
        approval_mode: str | None = None,
    ) -> tuple[str, int]:
        """`Runtime.send` on whichever replica runs the conversation. -> (run_id, seq)"""
        for _ in range(ROUTE_ATTEMPTS):
            try:
                return await self._runtime.send(cid, content, attachments, approval_mode)
            except RunElsewhere as exc:
                if self._owners is None:
                    raise
                body: dict[str, Any] = {"content": content, "attachments": list(attachments)}
                if approval_mode is not None:
                    body["approval_mode"] = approval_mode
                result = await self._owners.ask(cid, exc.holder, "message", body)
            if "run_id" in result:
                return str(result["run_id"]), int(result["seq"])
            if "quota" in result:
                raise RunQuotaExceeded(int(result["quota"]))
            if "gone" in result:
                raise ConversationGone(cid)
            # withdrawn or elsewhere: the lease moved meanwhile; go round again
        raise RunElsewhere(cid, "(moving)")

    async def interrupt(self, cid: str) -> str | None:
        """Stop the conversation's run wherever it goes; its run id (None: none)."""
        run_id = self._runtime.active_run(cid)
        if run_id is not None or self._owners is None:
            await self._runtime.interrupt(cid)
            return run_id
        holder = await self._owners.holder(cid)
        if holder is None:
            return None  # no run, or a dead replica's, which the lease sweep closes
        result = await self._owners.ask(cid, holder, "interrupt", {})
        found = result.get("run_id")
        return None if found is None else str(found)

    async def answer(self, cid: str, request_id: str, decision: Decision) -> bool:
        """The owner's answer to an approval request; False when nothing waits on it."""
        if await self._runtime.approvals.answer(cid, request_id, decision):
            return True
        body = {"request_id": request_id, "decision": decision}
        return bool((await self._ask_holder(cid, "approval", body)).get("answered"))

    async def decide_plan(self, cid: str, plan_id: str, decision: PlanDecision) -> bool:
        """The owner's decision on a proposed plan, for the run waiting on it here or on
        the replica that runs it; False when none waits on it."""
        if self._runtime.approvals.decide_plan(cid, plan_id, decision):
            return True
        body = {"plan_id": plan_id, "approve": decision.approve}
        body |= {"items": decision.items, "mode": decision.mode}
        return bool((await self._ask_holder(cid, "plan", body)).get("decided"))

    async def _ask_holder(self, cid: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        """`kind` applied by the replica holding the conversation's run ({} when none
        does: nothing waits anywhere)."""
        if self._owners is None:
            return {}
        holder = await self._owners.holder(cid)
        if holder is None:
            return {}
        return await self._owners.ask(cid, holder, kind, body)
