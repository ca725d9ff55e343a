"""ACP's methods mapped onto Burrow's HTTP API: a session is a conversation, a prompt a
message, the run's events session updates, an approval a permission request.

Tools always run in the conversation's sandbox: the editor's fs/terminal capabilities are
never used (they would run outside the sandbox, the journal and the checkpoints)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from burrow.acp.protocol import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    Peer,
    RpcError,
)

PROTOCOL_VERSION = 1
MODES = {
    "ask": "Ask before risky tool calls",
    "auto": "Run tools without asking",
    "read_only": "Read-only tools",
    "plan": "Plan first: read-only, then a plan to approve",
}
TOOL_KINDS = {
    "bash": "execute",
    "read_file": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "preview": "execute",
}
OUTPUT_TAIL = 16 * 1024  # what a tool call's card shows of its output


def stop_reason(finished: dict[str, Any]) -> str:
    status = finished.get("status")
    if status == "canceled":
        return "cancelled"
    if status == "budget_exceeded":
        kind = (finished.get("budget") or {}).get("kind", "")
        return "max_turn_requests" if kind == "steps" else "max_tokens"
    if status == "failed":
        raise RpcError(INTERNAL_ERROR, f"The run failed: {finished.get('error')}")
    return "end_turn"


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_call(data: dict[str, Any]) -> dict[str, Any]:
    """The `tool_call` update for a tool.started event; file writes carry their diff."""
    name, arguments = str(data["name"]), data["arguments"]
    args = arguments if isinstance(arguments, dict) else {}
    path = args.get("path")
    title = f"{name} {args['command']}" if "command" in args else f"{name} {path or ''}".strip()
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        "toolCallId": data["call_id"],
        "title": title[:200],
        "kind": TOOL_KINDS.get(name, "other"),
        "status": "in_progress",
        "rawInput": arguments,
        "content": diff_content(name, args),
    }
    if isinstance(path, str):
        update["locations"] = [{"path": workspace_path(path)}]
    return update


def workspace_path(path: str) -> str:
    """The sandbox's absolute path: the editor's own files are not the sandbox's."""
    return path if path.startswith("/") else f"/workspace/{path}"


def diff_content(name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    path = args.get("path")
    if not isinstance(path, str):
        return []
    if name == "write_file" and isinstance(args.get("content"), str):
        # Burrow's events hold the new content only: the editor sees it as written whole.
        return [
            {
                "type": "diff",
                "path": workspace_path(path),
                "oldText": None,
                "newText": args["content"],
            }
        ]
    if name == "edit_file" and isinstance(args.get("new_text"), str):
        old = args.get("old_text") if isinstance(args.get("old_text"), str) else None
        return [
            {
                "type": "diff",
                "path": workspace_path(path),
                "oldText": old,
                "newText": args["new_text"],
            }
        ]
    return []


class Session:
    def __init__(self, cid: str) -> None:
        self.cid = cid
        self.outputs: dict[str, str] = {}
        self.calls: dict[str, dict[str, Any]] = {}


class Agent:
    """The ACP agent side, a client of the server at `base_url` with `token`."""

    def __init__(self, base_url: str, token: str | None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=httpx.Timeout(30.0)
        )
        self.peer: Peer | None = None
        self.sessions: dict[str, Session] = {}

    async def close(self) -> None:
        await self.http.aclose()

    # --- the API, with its failures as precise JSON-RPC errors

    async def api(self, method: str, path: str, body: Any = None) -> Any:
        try:
            answer = await self.http.request(method, path, json=body)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        return self._checked(answer)

    def _unreachable(self, exc: Exception) -> RpcError:
        return RpcError(
            INTERNAL_ERROR,
            f"Cannot reach the Burrow server at {self.base_url} ({exc or type(exc).__name__}): "
            "start it with `burrow serve`, or run `burrow acp --server URL`.",
        )

    def _checked(self, answer: httpx.Response) -> Any:
        if answer.status_code == 401:
            raise RpcError(
                AUTH_REQUIRED,
                "Not signed in to Burrow: set BURROW_TOKEN in the editor's agent settings to "
                "an API token (web UI: Settings → API tokens).",
            )
        try:
            body = answer.json() if answer.content else None
        except json.JSONDecodeError:
            body = None
        if answer.status_code == 404:
            raise RpcError(RESOURCE_NOT_FOUND, "No such conversation (or it is not yours).")
        if not answer.is_success:
            error = body.get("error", {}) if isinstance(body, dict) else {}
            message = error.get("message") or answer.text[:200]
            code = INVALID_PARAMS if answer.status_code in (400, 422) else INTERNAL_ERROR
            raise RpcError(code, f"Burrow answered {answer.status_code}: {message}")
        return body

    # --- ACP methods

    async def on_request(self, method: str, params: Any) -> Any:
        if method != "initialize" and method not in HANDLED:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, f"{method} takes an object of parameters.")
        return await getattr(self, HANDLED.get(method, "initialize"))(params)

    async def on_notification(self, method: str, params: Any) -> None:
        if method == "session/cancel" and isinstance(params, dict):
            session = self.sessions.get(str(params.get("sessionId")))
            if session is not None:
                await self.api("POST", f"/api/conversations/{session.cid}/interrupt", {})

    async def initialize(self, params: dict[str, Any]) -> Any:
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            },
            "authMethods": [],
            "agentInfo": {"name": "burrow", "title": "Burrow", "version": "0.1.0"},
        }

    def _modes(self, current: str) -> dict[str, Any]:
        return {
            "currentModeId": current,
            "availableModes": [
                {"id": mode, "name": mode, "description": text} for mode, text in MODES.items()
            ],
        }

    async def new_session(self, params: dict[str, Any]) -> Any:
        cwd = params.get("cwd")
        if not isinstance(cwd, str):
            raise RpcError(INVALID_PARAMS, "session/new needs cwd (an absolute path).")
        title = f"ACP: {cwd.rstrip('/').rsplit('/', 1)[-1] or cwd}"[:60]
        created = await self.api("POST", "/api/conversations", {"title": title})
        self.sessions[created["id"]] = Session(created["id"])
        return {
            "sessionId": created["id"],
            "modes": self._modes(created.get("approval_mode", "ask")),
        }

    async def _session(self, params: dict[str, Any]) -> tuple[Session, dict[str, Any]]:
        cid = params.get("sessionId")
        if not isinstance(cid, str) or not cid or len(cid) > 128:
            raise RpcError(INVALID_PARAMS, "sessionId must be a conversation id.")
        conversation = await self.api("GET", f"/api/conversations/{cid}")
        session = self.sessions.setdefault(cid, Session(cid))
        return session, conversation

    async def load_session(self, params: dict[str, Any]) -> Any:
        session, conversation = await self._session(params)
        after = 0
        while True:
            page = await self.api(
                "GET", f"/api/conversations/{session.cid}/events?after={after}&format=json"
            )
            if not page:
                break
            for event in page:
                after = event["seq"]
                for update in self._updates(session, event, replay=True):
                    self._send_update(session, update)
        return {"modes": self._modes(conversation.get("approval_mode", "ask"))}

    async def set_mode(self, params: dict[str, Any]) -> Any:
        session, _ = await self._session(params)
        mode = params.get("modeId")
        if mode not in MODES:
            raise RpcError(INVALID_PARAMS, f"modeId must be one of {', '.join(MODES)}.")
        await self.api("PATCH", f"/api/conversations/{session.cid}", {"approval_mode": mode})
        return {}

    async def prompt(self, params: dict[str, Any]) -> Any:
        session, conversation = await self._session(params)
        content = prompt_text(params.get("prompt"))
        after = int(conversation.get("last_seq") or 0)
        sent = await self.api(
            "POST", f"/api/conversations/{session.cid}/messages", {"content": content}
        )
        run_id = sent["run_id"]
        async for event in self._follow(session.cid, after):
            if event.get("run_id") != run_id:
                continue
            if event["type"] == "approval.requested":
                await self._ask_permission(session, event["data"])
            elif event["type"] == "plan.proposed":
                self._send_update(session, *self._updates(session, event, replay=False))
                await self._ask_plan(session, event["data"])
                continue
            for update in self._updates(session, event, replay=False):
                self._send_update(session, update)
            if event["type"] == "run.finished":
                return {"stopReason": stop_reason(event["data"])}
        raise RpcError(INTERNAL_ERROR, "The server ended the event stream before the run ended.")

    async def _follow(self, cid: str, after: int) -> AsyncIterator[dict[str, Any]]:
        """The conversation's events after `after`, live (SSE)."""
        try:
            async with self.http.stream(
                "GET", f"/api/conversations/{cid}/events", params={"after": after}, timeout=None
            ) as answer:
                if not answer.is_success:
                    await answer.aread()
                    self._checked(answer)
                async for line in answer.aiter_lines():
                    if line.startswith("data:"):
                        yield json.loads(line[5:])
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc

    async def _ask_permission(self, session: Session, data: dict[str, Any]) -> None:
        assert self.peer is not None
        call = session.calls.get(data["call_id"], {"toolCallId": data["call_id"]})
        params = {
            "sessionId": session.cid,
            "toolCall": {
                "toolCallId": data["call_id"],
                "title": call.get("title", data["tool"]),
                "kind": call.get("kind", "other"),
                "status": "pending",
                "rawInput": data["arguments"],
            },
            "options": [
                {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
            ],
        }
        try:
            answer = await self.peer.request("session/request_permission", params)
            outcome = (answer or {}).get("outcome") or {}
            allowed = (
                outcome.get("outcome") == "selected" and outcome.get("optionId") == "allow_once"
            )
        except RpcError:
            allowed = False
        decision = "allow_once" if allowed else "deny"
        try:
            await self.api(
                "POST",
                f"/api/conversations/{session.cid}/approvals/{data['request_id']}",
                {"decision": decision},
            )
        except RpcError:
            pass  # already resolved (an interrupt denies it): the run's events say what happened

    async def _ask_plan(self, session: Session, data: dict[str, Any]) -> None:
        """A proposed plan (plan mode) as a permission request: ACP has no plan approval
        of its own; the plan itself went out as a `plan` update just before. Approved, the
        run goes on in the conversation's own mode; refused or unanswered, it ends."""
        assert self.peer is not None
        params = {
            "sessionId": session.cid,
            "toolCall": {
                "toolCallId": data["plan_id"],
                "title": "Carry out this plan",
                "kind": "think",
                "status": "pending",
                "rawInput": {"items": data.get("items", [])},
            },
            "options": [
                {"optionId": "allow_once", "name": "Approve the plan", "kind": "allow_once"},
                {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
            ],
        }
        try:
            answer = await self.peer.request("session/request_permission", params)
            outcome = (answer or {}).get("outcome") or {}
            approved = (
                outcome.get("outcome") == "selected" and outcome.get("optionId") == "allow_once"
            )
        except RpcError:
            approved = False
        decision = {"decision": "approve" if approved else "reject"}
        try:
            await self.api(
                "POST", f"/api/conversations/{session.cid}/plans/{data['plan_id']}", decision
            )
        except RpcError:
            pass  # decided already, or the run ended: its events say what happened

    def _send_update(self, session: Session, *updates: dict[str, Any]) -> None:
        assert self.peer is not None
        for update in updates:
            self.peer.notify("session/update", {"sessionId": session.cid, "update": update})

    def _updates(
        self, session: Session, event: dict[str, Any], *, replay: bool
    ) -> list[dict[str, Any]]:
        kind, data = event["type"], event.get("data") or {}
        match kind:
            case "user.message":
                return [{"sessionUpdate": "user_message_chunk", "content": _text(data["content"])}]
            case "assistant.text.delta" if not replay:
                return [{"sessionUpdate": "agent_message_chunk", "content": _text(data["text"])}]
            case "assistant.thinking.delta" if not replay:
                return [{"sessionUpdate": "agent_thought_chunk", "content": _text(data["text"])}]
            case "assistant.message" if replay:
                found = []
                if data.get("thinking"):
                    found.append(
                        {"sessionUpdate": "agent_thought_chunk", "content": _text(data["thinking"])}
                    )
                if data.get("content"):
                    found.append(
                        {"sessionUpdate": "agent_message_chunk", "content": _text(data["content"])}
                    )
                return found
            case "tool.started":
                update = tool_call(data)
                session.calls[data["call_id"]] = update
                return [update]
            case "tool.output" if not replay:
                text = (session.outputs.get(data["call_id"], "") + data["text"])[-OUTPUT_TAIL:]
                session.outputs[data["call_id"]] = text
                return [self._call_update(session, data["call_id"], "in_progress", text)]
            case "approval.requested":
                return [self._call_update(session, data["call_id"], "pending", None)]
            case "tool.finished":
                session.outputs.pop(data["call_id"], None)
                status = "failed" if data.get("is_error") else "completed"
                update = self._call_update(
                    session, data["call_id"], status, str(data["output"])[-OUTPUT_TAIL:]
                )
                update["rawOutput"] = {
                    k: data.get(k) for k in ("exit_code", "is_error", "truncated", "duration_ms")
                }
                return [update]
            case "plan.proposed" | "plan.updated":
                entries = [
                    {
                        "content": str(item.get("text", "")),
                        "priority": "medium",
                        "status": "completed" if item.get("done") else "pending",
                    }
                    for item in data.get("items", [])
                    if isinstance(item, dict)
                ]
                return [{"sessionUpdate": "plan", "entries": entries}]
        return []

    def _call_update(
        self, session: Session, call_id: str, status: str, text: str | None
    ) -> dict[str, Any]:
        call = session.calls.get(call_id, {})
        content = [c for c in call.get("content", []) if c.get("type") == "diff"]
        if text:
            content.append({"type": "content", "content": _text(text)})
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call_id,
            "status": status,
        }
        if text is not None:
            update["content"] = content
        return update


HANDLED = {
    "initialize": "initialize",
    "session/new": "new_session",
    "session/load": "load_session",
    "session/prompt": "prompt",
    "session/set_mode": "set_mode",
}


def prompt_text(blocks: Any) -> str:
    """A prompt's content blocks as one message: text as is, embedded resources quoted."""
    if not isinstance(blocks, list) or not blocks:
        raise RpcError(INVALID_PARAMS, "prompt must be a non-empty list of content blocks.")
    parts = []
    for block in blocks:
        if not isinstance(block, dict):
            raise RpcError(INVALID_PARAMS, "Each prompt block must be an object.")
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "resource" and isinstance(block.get("resource"), dict):
            resource = block["resource"]
            parts.append(f'<file uri="{resource.get("uri")}">\n{resource.get("text", "")}\n</file>')
        elif block.get("type") == "resource_link":
            parts.append(f"(file in the editor: {block.get('uri')})")
        else:
            raise RpcError(INVALID_PARAMS, f"Unsupported prompt block type: {block.get('type')!r}.")
    return "\n\n".join(parts)
