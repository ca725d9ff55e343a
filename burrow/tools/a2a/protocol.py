"""The A2A shapes Burrow reads and writes, both as a server and as the `delegate` client.

Supported: the agent card, `message/send` and `message/stream` with text parts,
`tasks/get`, `tasks/cancel` and `tasks/resubscribe`. Not supported: push notifications
(the card says so), file and data parts. A task is one Burrow run (its id is the run's);
its `contextId` is the conversation, so a later message with that `contextId` and no
`taskId` is a new task there.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

PROTOCOL_VERSION = "0.3.0"
CARD_PATH = "/.well-known/agent-card.json"
MAX_MESSAGE_CHARS = 100_000  # one inbound task's text

Role = Literal["user", "agent"]
TaskState = Literal["submitted", "working", "completed", "failed", "canceled", "rejected"]

# JSON-RPC 2.0 error codes, and the A2A one Burrow uses.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Part(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: str
    text: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    role: Literal["user", "agent"]
    parts: list[Part] = Field(min_length=1, max_length=100)
    message_id: str = Field(alias="messageId", min_length=1, max_length=200)
    context_id: str | None = Field(default=None, alias="contextId", max_length=200)
    task_id: str | None = Field(default=None, alias="taskId", max_length=200)
    kind: Literal["message"] = "message"

    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if p.kind == "text" and p.text)


class SendConfiguration(BaseModel):
    """`blocking: false` answers the task as soon as it started (follow it with
    `tasks/get`, cancel it); otherwise `message/send` answers it ended."""

    model_config = ConfigDict(extra="allow")
    blocking: bool | None = None


class SendParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    message: Message
    configuration: SendConfiguration | None = None


class TaskIdParams(BaseModel):
    """tasks/get, tasks/cancel, tasks/resubscribe. `historyLength` bounds the history
    `tasks/get` answers (the task's user messages and answers, oldest first)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    id: str = Field(min_length=1, max_length=200)
    history_length: int | None = Field(default=None, alias="historyLength", ge=0)


def agent_card(endpoint: str) -> dict[str, Any]:
    """What another agent reads at `CARD_PATH` before handing Burrow a task."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "name": "Burrow",
        "description": (
            "A coding agent that works in a sandboxed workspace: give it a task in plain "
            "text and it answers with what it did. Calls that would need a person's "
            "approval are refused."
        ),
        "url": endpoint,
        "preferredTransport": "JSONRPC",
        "version": "0.1.0",
        "capabilities": {"streaming": True, "pushNotifications": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {
                "id": "coding-task",
                "name": "Coding task in a sandbox",
                "description": "Reads, writes and runs code in its own sandboxed workspace.",
                "tags": ["code", "shell", "sandbox"],
            }
        ],
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "security": [{"bearer": []}],
    }


def text_message(
    text: str, role: Literal["user", "agent"], context_id: str | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "kind": "message",
        "role": role,
        "messageId": f"m_{secrets.token_hex(8)}",
        "parts": [{"kind": "text", "text": text}],
    }
    if context_id is not None:
        message["contextId"] = context_id
    return message


def status(
    state: TaskState, text: str | None = None, context_id: str | None = None
) -> dict[str, Any]:
    found: dict[str, Any] = {"state": state, "timestamp": datetime.now(UTC).isoformat()}
    if text:
        found["message"] = text_message(text, "agent", context_id)
    return found


def task(task_id: str, context_id: str, state: TaskState, text: str | None) -> dict[str, Any]:
    """A task as `message/send` returns it: the final answer as its artifact too."""
    found: dict[str, Any] = {
        "kind": "task",
        "id": task_id,
        "contextId": context_id,
        "status": status(state, text, context_id),
    }
    if text and state == "completed":
        found["artifacts"] = [artifact(text)]
    return found


def artifact(text: str) -> dict[str, Any]:
    return {"artifactId": "answer", "name": "answer", "parts": [{"kind": "text", "text": text}]}


def rpc_result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(request_id: Any, error: RpcError) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": error.code, "message": error.message},
    }


def answer_text(result: dict[str, Any]) -> tuple[str, bool]:
    """A peer's `message/send` result as (text, failed): a Task's artifacts or status
    message, or a Message's parts."""
    if result.get("kind") == "message":
        return _parts_text(result.get("parts")), False
    state = (result.get("status") or {}).get("state")
    texts = [
        _parts_text(a.get("parts")) for a in result.get("artifacts") or [] if isinstance(a, dict)
    ]
    text = "\n".join(t for t in texts if t)
    if not text:
        message = (result.get("status") or {}).get("message") or {}
        text = _parts_text(message.get("parts") if isinstance(message, dict) else None)
    return text, state not in ("completed", None)


def _parts_text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "\n".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )
