"""A2A inbound: the public agent card and the JSON-RPC endpoint another agent hands tasks to.

Only an API token authenticates a call (`Authorization: Bearer`), never a session cookie: a
page in a browser cannot send that header cross-site without a preflight, so the endpoint
needs no Origin check. Protocol errors answer 200 with a JSON-RPC error, as the binding
says; a missing or bad token answers 401 like the rest of the API.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from burrow.api import a2a_tasks
from burrow.api.deps import ServicesDep, StreamCapDep, bearer_token, credential_digest
from burrow.api.errors import ApiError
from burrow.api.streams import HeldStreamingResponse, TooManyStreams
from burrow.store.records import User
from burrow.tools.a2a import protocol as a2a
from burrow.tools.a2a.protocol import RpcError

router = APIRouter(tags=["a2a"])

ENDPOINT = "/a2a"
MAX_BODY_BYTES = 1024 * 1024
METHODS = ("message/send", "message/stream")


@router.get(a2a.CARD_PATH)
async def agent_card(request: Request) -> dict[str, Any]:
    return a2a.agent_card(str(request.base_url).rstrip("/") + ENDPOINT)


@router.post(ENDPOINT, response_model=None)
async def json_rpc(request: Request, svc: ServicesDep, cap: StreamCapDep) -> Response:
    user = await _caller(request, svc)
    request_id: Any = None
    try:
        body = await _body(request)
        if isinstance(body, dict):
            request_id = body.get("id")
        method, params = _call(body)
        try:
            send = a2a.SendParams.model_validate(params)
        except ValidationError as exc:
            raise RpcError(a2a.INVALID_PARAMS, _first_problem(exc)) from None
        # A stream holds its connection for the whole task: it counts as one of the caller's
        # open streams (BURROW_MAX_STREAMS_PER_USER), taken before the run would start.
        streaming = method == "message/stream"
        slot = cap.acquire(user.id, "a2a", credential_digest(request)) if streaming else None
        try:
            task = await a2a_tasks.start(svc, user, send.message)
        except BaseException:
            if slot is not None:
                slot.release()
            raise
    except RpcError as exc:
        return JSONResponse(a2a.rpc_error(request_id, exc))
    except TooManyStreams as exc:
        return JSONResponse(a2a.rpc_error(request_id, RpcError(a2a.INTERNAL_ERROR, str(exc))))
    if slot is None:  # message/send
        return JSONResponse(a2a.rpc_result(request_id, await a2a_tasks.outcome(svc, task)))
    return HeldStreamingResponse(
        _sse(svc, task, request_id),
        slot,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
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


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "params"
    return f"Invalid params: {where}: {error['msg']}."


async def _sse(svc: ServicesDep, task: a2a_tasks.Task, request_id: Any) -> AsyncIterator[bytes]:
    first = a2a.task(task.run_id, task.cid, "working", None)
    yield _frame(a2a.rpc_result(request_id, first))
    async for update in a2a_tasks.updates(svc, task):
        yield _frame(a2a.rpc_result(request_id, update))


def _frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"
