"""An A2A task as a Burrow run: start it in a conversation of the caller's, unattended (a
call that would ask is refused), follow the journal to its `run.finished`, and find it
again by its id (the run's) to read (`tasks/get`), cancel or resubscribe to it.

The run is watched for at most `BURROW_A2A_TIMEOUT` seconds, then stopped: nobody can
answer a task that hangs. A client that goes away leaves the run to end on its own, still
unattended (the runtime clears the mark when the run ends).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from burrow.runs.conversations.service import RunElsewhere
from burrow.runs.journal.events import EventType
from burrow.runs.workspace.quotas import RunQuotaExceeded
from burrow.services import Services
from burrow.store.events import ConversationGone
from burrow.store.records import User
from burrow.tools.a2a import protocol as a2a
from burrow.tools.a2a.protocol import RpcError, TaskState

TITLE_CHARS = 60

_STATES: dict[str, TaskState] = {
    "completed": "completed",
    "canceled": "canceled",
}  # every other ending (failed, budget_exceeded, ...) is a failed task


CANCEL_WAIT_SECONDS = 10.0  # for a canceled run to finish before its task is answered


@dataclass
class Task:
    cid: str
    run_id: str
    seq: int  # the user message's: the run's events come after it


@dataclass
class Snapshot:
    """A task as its journal has it so far."""

    state: TaskState
    text: str  # the answer so far, or the failure
    seq: int  # the last event read
    history: list[dict[str, Any]] = field(default_factory=list)  # the task's messages


async def find(svc: Services, user: User, task_id: str) -> Task:
    """The caller's task by its id; another's answers as a missing one."""
    found = await svc.conversations.run_start(task_id, user.id) if task_id else None
    if found is None:
        raise RpcError(a2a.TASK_NOT_FOUND, f"Task not found: {task_id[:100]}.")
    cid, started = found
    return Task(cid, task_id, started - 1)


async def snapshot(svc: Services, task: Task) -> Snapshot:
    state: TaskState = "working"
    answer, failure, seq = "", "", task.seq
    # The history: the user's messages to the run (its first one is the task's, at
    # `task.seq`, read too) and the run's answers, oldest first.
    history: list[dict[str, Any]] = []
    async for page in svc.conversations.pages(task.cid, max(task.seq - 1, 0)):
        for event in page:
            seq = max(seq, event.seq)
            if event.run_id != task.run_id:
                continue
            if event.type == EventType.USER_MESSAGE and event.data["content"]:
                history.append(_said(task, event.seq, event.data["content"], "user"))
            elif event.type == EventType.ASSISTANT_MESSAGE and event.data["content"]:
                answer = event.data["content"]
                history.append(_said(task, event.seq, answer, "agent"))
            elif event.type == EventType.RUN_FINISHED:
                state = _STATES.get(event.data["status"], "failed")
                failure = event.data["error"] or event.data["status"]
                text = answer if state == "completed" else failure
                return Snapshot(state, text, seq, history)
    return Snapshot(state, answer, seq, history)


def _said(task: Task, seq: int, text: str, role: a2a.Role) -> dict[str, Any]:
    """A message of the task's history, its id the same at every read."""
    message = a2a.text_message(text, role, task.cid)
    message["messageId"] = f"{task.run_id}-{seq}"
    message["taskId"] = task.run_id
    return message


def as_task(task: Task, now: Snapshot, history_length: int | None = None) -> dict[str, Any]:
    """The task as `tasks/get` answers it: with its history, the last `history_length`
    messages of it when given."""
    found = a2a.task(task.run_id, task.cid, now.state, now.text or None)
    kept = now.history if history_length is None else now.history[-history_length:]
    found["history"] = kept if history_length != 0 else []
    return found


async def cancel(svc: Services, task: Task) -> dict[str, Any]:
    """Stops the task's run and answers the task as it ended; a task already ended is
    TaskNotCancelable."""
    now = await snapshot(svc, task)
    if now.state != "working":
        raise RpcError(a2a.TASK_NOT_CANCELABLE, f"Task {task.run_id} is {now.state}: it ended.")
    await svc.conversations.interrupt(task.cid)
    try:
        async with asyncio.timeout(CANCEL_WAIT_SECONDS):
            async for update in updates(svc, task, since=now):
                if update.get("final"):
                    break
    except TimeoutError:
        pass
    return as_task(task, await snapshot(svc, task))


async def start(svc: Services, user: User, message: a2a.Message) -> Task:
    if message.task_id is not None:
        # A message to a task continues it, in its context; Burrow's tasks take no more
        # input once they run (nothing is asked of an unattended run) and none after
        # they end: a new task in the same context is what goes on.
        task = await find(svc, user, message.task_id)
        if message.context_id is not None and message.context_id != task.cid:
            raise RpcError(
                a2a.INVALID_PARAMS, f"Task {task.run_id} is not in context {message.context_id}."
            )
        now = await snapshot(svc, task)
        raise RpcError(
            a2a.INVALID_PARAMS,
            f"Task {task.run_id} is in terminal state: {now.state}; send the message with "
            f"contextId {task.cid} and no taskId for a new task."
            if now.state != "working"
            else f"Task {task.run_id} is still working: wait for it to end.",
        )
    text = message.text()
    if not text.strip():
        raise RpcError(a2a.INVALID_PARAMS, "The message has no text part.")
    if len(text) > a2a.MAX_MESSAGE_CHARS:
        raise RpcError(
            a2a.INVALID_PARAMS,
            f"The message has {len(text):,} characters; at most {a2a.MAX_MESSAGE_CHARS:,}.",
        )
    if message.context_id is not None:
        conversation = await svc.conversations.get(message.context_id, owner_id=user.id)
        if conversation is None:  # someone else's answers the same as a missing one
            raise RpcError(a2a.TASK_NOT_FOUND, f"Context not found: {message.context_id}.")
        if await svc.conversations.busy(conversation.id):
            # Steering would join a run someone else may be watching and answering.
            raise RpcError(
                a2a.INVALID_PARAMS,
                f"Context {conversation.id} has a task going: wait for it to end.",
            )
        cid = conversation.id
    else:
        title = "A2A: " + " ".join(text.split())[:TITLE_CHARS]
        created = await svc.conversations.create(user.id, title, approval_mode="ask")
        cid = created.id
    try:
        run_id, seq = await svc.conversations.send_unattended(cid, text)
    except RunQuotaExceeded as exc:
        if message.context_id is None:  # a flood over the cap leaves no empty conversations
            await svc.conversations.delete(cid)
        raise RpcError(a2a.INTERNAL_ERROR, str(exc)) from exc
    except ConversationGone as exc:
        raise RpcError(a2a.TASK_NOT_FOUND, f"Context not found: {cid}.") from exc
    except RunElsewhere as exc:  # a run on another replica: steering is refused as above
        raise RpcError(
            a2a.INVALID_PARAMS, f"Context {cid} has a task going: wait for it to end."
        ) from exc
    return Task(cid, run_id, seq)


async def updates(
    svc: Services, task: Task, since: Snapshot | None = None
) -> AsyncIterator[dict[str, Any]]:
    """The task's A2A stream events until the last one (`final: true`), from its start or
    from what `since` read."""
    answer = since.text if since is not None else ""
    ids = {"taskId": task.run_id, "contextId": task.cid}
    deadline = asyncio.get_running_loop().time() + svc.settings.a2a_timeout
    batches = svc.conversations.follow(task.cid, since.seq if since is not None else task.seq)
    try:
        while True:
            # The bound is on waiting for the journal only, never around a `yield`: a
            # timeout there would cancel whoever consumes this generator instead.
            try:
                async with asyncio.timeout_at(deadline):
                    batch = await anext(batches)
            except StopAsyncIteration:
                break
            except TimeoutError:
                await svc.conversations.interrupt(task.cid)
                stopped = f"Stopped after {svc.settings.a2a_timeout:g} s (BURROW_A2A_TIMEOUT)."
                yield _status(ids, "failed", stopped, final=True)
                return
            for event in batch:
                if event.run_id != task.run_id:
                    continue
                data = event.data
                if event.type == EventType.ASSISTANT_MESSAGE and data["content"]:
                    answer = data["content"]
                    yield _status(ids, "working", answer, final=False)
                elif event.type == EventType.TOOL_STARTED:
                    yield _status(ids, "working", f"Running {data['name']}.", final=False)
                elif event.type == EventType.RUN_FINISHED:
                    state = _STATES.get(data["status"], "failed")
                    if state == "completed" and answer:
                        yield {
                            **ids,
                            "kind": "artifact-update",
                            "artifact": a2a.artifact(answer),
                            "lastChunk": True,
                        }
                    text = answer if state == "completed" else data["error"] or data["status"]
                    yield _status(ids, state, text, final=True)
                    return
    finally:
        if isinstance(batches, AsyncGenerator):  # unsubscribes now, not when collected
            await batches.aclose()
    yield _status(ids, "failed", "The conversation was deleted.", final=True)


async def outcome(svc: Services, task: Task) -> dict[str, Any]:
    """The finished task, as `message/send` answers."""
    last: dict[str, Any] = {}
    async for update in updates(svc, task):
        last = update
    status = last["status"]
    text = a2a.answer_text({"kind": "message", **status.get("message", {})})[0]
    return a2a.task(task.run_id, task.cid, status["state"], text or None)


def _status(ids: dict[str, str], state: TaskState, text: str, *, final: bool) -> dict[str, Any]:
    return {
        **ids,
        "kind": "status-update",
        "status": a2a.status(state, text, ids["contextId"]),
        "final": final,
    }
