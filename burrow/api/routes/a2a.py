"""A2A inbound: the public agent card and the JSON-RPC endpoint another agent hands tasks to.

Only an API token authenticates a call (`Authorization: Bearer`), never a session cookie: a
page in a browser cannot send that header cross-site without a preflight, so the endpoint
needs no Origin check. Protocol errors answer 200 with a JSON-RPC error, as the binding
says; a missing or bad token answers 401 like the rest of the API.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError

from burrow.api import a2a_tasks
from burrow.api.deps import ServicesDep, StreamCapDep, bearer_token, credential_digest
from burrow.api.errors import ApiError
from burrow.api.streams import HeldStreamingResponse, StreamSlot, TooManyStreams
from burrow.store.records import User
from burrow.tools.a2a import protocol as a2a
from burrow.tools.a2a.protocol import RpcError

router = APIRouter(tags=["a2a"])
P = TypeVar("P", bound=BaseModel)

ENDPOINT = "/a2a"
MAX_BODY_BYTES = 1024 * 1024
TASK_METHODS = ("tasks/get", "tasks/cancel", "tasks/resubscribe")
METHODS = ("message/send", "message/stream", *TASK_METHODS)
STREAMING_METHODS = ("message/stream", "tasks/resubscribe")


@router.get(a2a.CARD_PATH)
async def agent_card(request: Request) -> dict[str, Any]:
    return a2a.agent_card(str(request.base_url).rstrip("/") + ENDPOINT)


@router.post(ENDPOINT, response_model=None)
async def json_rpc(request: Request, svc: ServicesDep, cap: StreamCapDep) -> Response:
    user = await _caller(request, svc)
    request_id: Any = None
    method = ""
    try:
        body = await _body(request)
        request_id = _id(body)
        method, params = _call(body)
        # Params are checked before a call without an id is let go: a call that cannot be
        # served is answered with its error (id null), as an unknown method is; A2A has no
        # notifications, and a caller left with no answer to a wrong call cannot tell.
        checked: a2a.TaskIdParams | a2a.SendParams = (
            _params(a2a.TaskIdParams, params)
            if method in TASK_METHODS
            else _params(a2a.SendParams, params)
        )
        if "id" not in body:
            # A notification: JSON-RPC answers none. Every method here answers what the
            # caller needs (a task, a stream), so none is started for nobody to follow.
            return Response(status_code=204)
        if isinstance(checked, a2a.TaskIdParams):
            task = await a2a_tasks.find(svc, user, checked.id)
            if method == "tasks/get":
                now = await a2a_tasks.snapshot(svc, task)
                found = a2a_tasks.as_task(task, now, history_length=checked.history_length)
                return JSONResponse(a2a.rpc_result(request_id, found))
            if method == "tasks/cancel":
                return JSONResponse(a2a.rpc_result(request_id, await a2a_tasks.cancel(svc, task)))
            since: a2a_tasks.Snapshot | None = await a2a_tasks.snapshot(svc, task)
            slot: StreamSlot | None = cap.acquire(user.id, "a2a", credential_digest(request))
        else:
            send = checked
            since = None
            # A stream holds its connection for the whole task: it counts as one of the
            # caller's open streams (BURROW_MAX_STREAMS_PER_USER), taken before the run
            # would start.
            streaming = method == "message/stream"
            slot = cap.acquire(user.id, "a2a", credential_digest(request)) if streaming else None
            try:
                task = await a2a_tasks.start(svc, user, send.message)
            except BaseException:
                if slot is not None:
                    slot.release()
                raise
    except RpcError as exc:
        return _error(method, request_id, exc)
    except TooManyStreams as exc:
        return _error(method, request_id, RpcError(a2a.INTERNAL_ERROR, str(exc)))
    if slot is None:  # message/send
        if send.configuration is not None and send.configuration.blocking is False:
            # The task as it is now. Its run goes on as one whose client went away does:
            # unattended, to its end or a budget's (BURROW_A2A_TIMEOUT bounds a wait).
            started = a2a_tasks.as_task(task, await a2a_tasks.snapshot(svc, task))
            return JSONResponse(a2a.rpc_result(request_id, started))
        return JSONResponse(a2a.rpc_result(request_id, await a2a_tasks.outcome(svc, task)))
    return HeldStreamingResponse(
        _sse(svc, task, request_id, since),
        slot,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _error(method: str, request_id: Any, exc: RpcError) -> Response:
    """A JSON-RPC error; to a streaming method, as the one event of an event stream (what
    its clients read: an SDK client refuses any other content type)."""
    if method not in STREAMING_METHODS:
        return JSONResponse(a2a.rpc_error(request_id, exc))
    return Response(
        _frame(a2a.rpc_error(request_id, exc)),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store"},
    )


async def _caller(request: Request, svc: ServicesDep) -> User:
    token = bearer_token(request)
    user = await svc.accounts.user_for(token, "api") if token else None
    if user is None:
        raise ApiError(
            401,
            "unauthorized",
            "A2A calls need Authorization: Bearer <API token> (POST /api/auth/tokens).",
            {"WWW-Authenticate": "Bearer"},
        )
    return user


async def _body(request: Request) -> Any:
    size = 0
    chunks: list[bytes] = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise RpcError(a2a.INVALID_REQUEST, f"The request is over {MAX_BODY_BYTES:,} bytes.")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        raise RpcError(a2a.PARSE_ERROR, "The body is not JSON.") from None


def _call(body: Any) -> tuple[str, Any]:
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
        raise RpcError(
            a2a.INVALID_REQUEST, 'Send one JSON-RPC 2.0 request: {"jsonrpc": "2.0", ...}.'
        )
    method = body.get("method")
    if not isinstance(method, str):
        raise RpcError(a2a.INVALID_REQUEST, "The request has no method.")
    if method not in METHODS:
        raise RpcError(
            a2a.METHOD_NOT_FOUND, f"Burrow does not support {method[:100]!r}: {', '.join(METHODS)}."
        )
    return method, body.get("params")


def _id(body: Any) -> Any:
    """The request's id: a string, a number or null, as JSON-RPC 2.0 has it."""
    if not isinstance(body, dict):
        return None
    found = body.get("id")
    if found is not None and (isinstance(found, bool) or not isinstance(found, str | int | float)):
        raise RpcError(a2a.INVALID_REQUEST, "The id must be a string, a number or null.")
    return found


def _params(model: type[P], params: Any) -> P:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise RpcError(a2a.INVALID_PARAMS, _first_problem(exc)) from None


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "params"
    return f"Invalid params: {where}: {error['msg']}."


async def _sse(
    svc: ServicesDep,
    task: a2a_tasks.Task,
    request_id: Any,
    since: a2a_tasks.Snapshot | None,
) -> AsyncIterator[bytes]:
    """The task as it is, then its updates to the last (a resubscribe starts from what
    `since` read; a task already ended is its one, final, answer)."""
    now = since or a2a_tasks.Snapshot("working", "", task.seq)
    yield _frame(a2a.rpc_result(request_id, a2a_tasks.as_task(task, now)))
    if now.state != "working":
        return
    async for update in a2a_tasks.updates(svc, task, since=since):
        yield _frame(a2a.rpc_result(request_id, update))


def _frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"
