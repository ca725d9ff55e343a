"""E2B's control-plane REST API (the SDK's `E2B_API_URL`): create, list, get, kill, set
the timeout, pause and resume/connect sandboxes. Auth is the `X-API-KEY` header; a sandbox
of another key answers 404, as a missing one does. Errors are E2B's `{code, message}` plus
`error_code`, a closed vocabulary the SDK keeps as `Error.error_code`."""

from __future__ import annotations

import base64
import calendar
import json
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from burrow.sandbox.backend import SandboxError
from burrow.sandbox_host.keys import ApiKeys
from burrow.sandbox_host.network_options import NetworkRefused, read_network
from burrow.sandbox_host.paths import http_status
from burrow.sandbox_host.registry import (
    HostedSandbox,
    LimitReached,
    Registry,
    SandboxNotFound,
    WrongState,
)
from burrow.sandbox_host.template_api import TemplateApi
from burrow.sandbox_host.templates import TemplateError, Templates
from burrow.sandbox_host.users import E2B_USER

ENVD_VERSION = "0.5.7"  # the envd feature level served (see docs/sandbox-host.md)
TEMPLATES = {"base"}  # one environment: the host's base system, read-only, plus /workspace
MAX_BODY_BYTES = 64 * 1024
MAX_LISTED = 100  # sandboxes in a page of GET /sandboxes (E2B's most)
MAX_KEY_CHARS = 256
MAX_VALUE_CHARS = 4096
_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


class ApiError(Exception):
    def __init__(self, status: int, error_code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def error_response(status: int, error_code: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"code": status, "message": message, "error_code": error_code}, status_code=status
    )


class ControlApi:
    def __init__(
        self,
        registry: Registry,
        keys: ApiKeys,
        domain: str | None,
        templates: Templates | None = None,
    ) -> None:
        self.registry = registry
        self.keys = keys
        self.domain = domain
        self.templates = templates  # None: the base template only

    def routes(self) -> list[Route]:
        h = self._handler
        return [
            Route("/health", self.health, methods=["GET"]),
            Route("/sandboxes", h(self.create), methods=["POST"]),
            Route("/v2/sandboxes", h(self.create), methods=["POST"]),
            Route("/sandboxes", h(self.list), methods=["GET"]),
            Route("/v2/sandboxes", h(self.list), methods=["GET"]),
            Route("/sandboxes/{sandbox_id}", h(self.get), methods=["GET"]),
            Route("/sandboxes/{sandbox_id}", h(self.kill), methods=["DELETE"]),
            Route("/sandboxes/{sandbox_id}/timeout", h(self.set_timeout), methods=["POST"]),
            Route("/sandboxes/{sandbox_id}/refreshes", h(self.refresh), methods=["POST"]),
            Route("/sandboxes/{sandbox_id}/pause", h(self.pause), methods=["POST"]),
            Route("/sandboxes/{sandbox_id}/resume", h(self.resume), methods=["POST"]),
            Route("/sandboxes/{sandbox_id}/connect", h(self.resume), methods=["POST"]),
            Route("/v2/sandboxes/{sandbox_id}/connect", h(self.resume), methods=["POST"]),
            *([] if self.templates is None else TemplateApi(self.templates, _json_body).routes(h)),
            Route("/{rest:path}", h(self.unsupported), methods=_ALL_METHODS),
        ]

    def _handler(self, method: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            owner = self.keys.owner(request.headers.get("x-api-key"))
            if owner is None:
                return error_response(
                    401, "unauthorized", "Missing or invalid API key: send it as X-API-KEY."
                )
            try:
                response: Response = await method(request, owner)
                return response
            except ApiError as exc:
                return error_response(exc.status, exc.error_code, exc.message)
            except TemplateError as exc:
                return error_response(exc.status, exc.code, exc.message)
            except SandboxNotFound as exc:
                return error_response(404, "sandbox_not_found", str(exc))
            except LimitReached as exc:
                return error_response(429, "sandbox_limit", str(exc))
            except WrongState as exc:
                return error_response(409, "wrong_state", str(exc))
            except SandboxError as exc:
                return error_response(http_status(exc.code), str(exc.code), exc.message)

        return endpoint

    # -- routes -------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        """No auth: for load balancers and start-up probes."""
        return JSONResponse({"status": "ok"})

    async def create(self, request: Request, owner: str) -> Response:
        body = await _json_body(request)
        template = body.get("templateID", "base")
        built = None
        if isinstance(template, str) and template not in TEMPLATES and self.templates:
            built = self.templates.startable(owner, template)
        if not isinstance(template, str) or (template not in TEMPLATES and built is None):
            raise ApiError(
                404,
                "template_not_found",
                f"Template {template!r} not found: this sandbox host serves "
                f"{', '.join(sorted(TEMPLATES))} and the templates this key built.",
            )
        timeout = _optional_int(body, "timeout")
        # A client can only narrow the host's network policy (BURROW_SANDBOX_NETWORK and
        # its allowlist), never widen it: asking for internet access gets what the
        # operator allows; an option the host cannot honour is refused, never ignored.
        try:
            network = read_network(body)
        except NetworkRefused as exc:
            raise ApiError(400, "invalid_network", str(exc)) from None
        hosted = await self.registry.create(
            owner,
            template_id=template if built is None else built.template_id,
            timeout=timeout,
            metadata=_string_map(body, "metadata", self.registry.limits.max_metadata_entries),
            envs=_string_map(body, "envVars", self.registry.limits.max_env_entries),
            network=network,
            auto_pause=body.get("autoPause") is True,
            environment=None if built is None else built.ready_key,
            workdir=None if built is None or built.ready is None else built.ready.workdir,
            user=E2B_USER if built is None or built.ready is None else built.ready.user,
        )
        return JSONResponse(self._created(hosted), status_code=201)

    async def list(self, request: Request, owner: str) -> Response:
        """E2B's filters (state, metadata, template, startedAfter), newest first unless
        `order=asc`, in pages of `limit` (default and most 100) with the next page's
        cursor in `x-next-token`."""
        query = request.query_params
        states = {s for s in query.get("state", "").split(",") if s}
        wanted = _metadata_filter(query.get("metadata", ""))
        template = query.get("template")
        after = _instant(query, "startedAfter")
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise ApiError(400, "invalid_request", "order must be asc or desc.")
        limit = _bounded_int(query, "limit", 1, MAX_LISTED, MAX_LISTED)
        found = sorted(
            (
                s
                for s in self.registry.listed(owner)
                if (not states or s.state in states)
                and all(s.metadata.get(k) == v for k, v in wanted.items())
                and (template is None or s.template_id == template)
                and (after is None or _micros(s.started_at) >= after)
            ),
            key=_cursor,
            reverse=order == "desc",
        )
        token = query.get("nextToken")
        if token:
            start = _decode_cursor(token)
            found = [
                s for s in found if (_cursor(s) < start if order == "desc" else _cursor(s) > start)
            ]
        page, rest = found[:limit], found[limit:]
        headers = {"x-next-token": _encode_cursor(_cursor(page[-1]))} if rest and page else {}
        return JSONResponse([self._listed(s) for s in page], headers=headers)

    async def get(self, request: Request, owner: str) -> Response:
        hosted = self.registry.owned(owner, request.path_params["sandbox_id"])
        return JSONResponse(
            {**self._listed(hosted), "envdAccessToken": hosted.access_token, "domain": self.domain}
        )

    async def kill(self, request: Request, owner: str) -> Response:
        await self.registry.kill(owner, request.path_params["sandbox_id"])
        return Response(status_code=204)

    async def set_timeout(self, request: Request, owner: str) -> Response:
        body = await _json_body(request)
        timeout = _optional_int(body, "timeout")
        if timeout is None:
            raise ApiError(400, "invalid_request", "timeout (seconds) is required.")
        self.registry.set_timeout(owner, request.path_params["sandbox_id"], timeout)
        return Response(status_code=204)

    async def refresh(self, request: Request, owner: str) -> Response:
        body = await _json_body(request)
        duration = _optional_int(body, "duration")
        hosted = self.registry.owned(owner, request.path_params["sandbox_id"])
        self.registry.set_timeout(owner, hosted.sandbox_id, duration or 60)
        return Response(status_code=204)

    async def unsupported(self, request: Request, owner: str) -> Response:
        raise ApiError(
            501,
            "not_supported",
            f"{request.method} {request.url.path} is not served by burrow sandbox-host "
            "(metrics, logs, snapshots, forks, template tags, volumes, network updates): see "
            "docs/sandbox-host.md for what is.",
        )

    async def pause(self, request: Request, owner: str) -> Response:
        await self.registry.pause(owner, request.path_params["sandbox_id"])
        return Response(status_code=204)

    async def resume(self, request: Request, owner: str) -> Response:
        body = await _json_body(request)
        hosted = self.registry.owned(owner, request.path_params["sandbox_id"])
        was_paused = hosted.state == "paused"
        hosted = await self.registry.resume(
            owner, request.path_params["sandbox_id"], _optional_int(body, "timeout")
        )
        return JSONResponse(self._created(hosted), status_code=201 if was_paused else 200)

    # -- shapes -------------------------------------------------------------------------

    def _created(self, hosted: HostedSandbox) -> dict[str, Any]:
        return {
            "templateID": hosted.template_id,
            "sandboxID": hosted.sandbox_id,
            "clientID": "burrow",
            "envdVersion": ENVD_VERSION,
            "envdAccessToken": hosted.access_token,
            "trafficAccessToken": hosted.traffic_token,
            "domain": self.domain,
        }

    def _listed(self, hosted: HostedSandbox) -> dict[str, Any]:
        return {
            "templateID": hosted.template_id,
            "sandboxID": hosted.sandbox_id,
            "clientID": "burrow",
            "startedAt": _iso(hosted.started_at),
            "endAt": _iso(hosted.end_at),
            "cpuCount": self.registry.limits.cpu_count,
            "memoryMB": self.registry.limits.memory_mb,
            "diskSizeMB": self.registry.limits.disk_mb,
            "state": hosted.state,
            "envdVersion": ENVD_VERSION,
            "metadata": hosted.metadata,
        }


async def _json_body(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise ApiError(413, "body_too_large", f"Request body over {limit} bytes.")
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"Request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_json", "Request body must be a JSON object.")
    return body


def _optional_int(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ApiError(400, "invalid_request", f"{name} must be a non-negative integer.")
    return value


def _string_map(body: dict[str, Any], name: str, max_entries: int) -> dict[str, str]:
    value = body.get(name) or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ApiError(400, "invalid_request", f"{name} must map strings to strings.")
    if len(value) > max_entries or any(
        len(k) > MAX_KEY_CHARS or len(v) > MAX_VALUE_CHARS for k, v in value.items()
    ):
        raise ApiError(
            400,
            "invalid_request",
            f"{name}: at most {max_entries} entries, keys up to {MAX_KEY_CHARS} and values "
            f"up to {MAX_VALUE_CHARS} characters.",
        )
    return dict(value)


def _metadata_filter(query: str) -> dict[str, str]:
    """`metadata=k1%3Dv1%26k2%3Dv2`, as the SDK sends it (already URL-decoded once)."""
    from urllib.parse import parse_qsl

    return dict(parse_qsl(query, keep_blank_values=True))


def _micros(timestamp: float) -> int:
    """Microseconds since the epoch, as `_iso` writes the time (so a time read back from
    it compares equal)."""
    return _exact(datetime.fromtimestamp(timestamp, UTC))


def _exact(moment: datetime) -> int:
    return calendar.timegm(moment.utctimetuple()) * 1_000_000 + moment.microsecond


def _cursor(hosted: HostedSandbox) -> tuple[int, str]:
    return _micros(hosted.started_at), hosted.sandbox_id


def _encode_cursor(cursor: tuple[int, str]) -> str:
    return base64.urlsafe_b64encode(f"{cursor[0]}:{cursor[1]}".encode()).decode()


def _decode_cursor(token: str) -> tuple[int, str]:
    try:
        micros, sandbox_id = base64.urlsafe_b64decode(token.encode()).decode().split(":", 1)
        return int(micros), sandbox_id
    except (ValueError, UnicodeError):
        raise ApiError(400, "invalid_request", "nextToken is not one this host gave.") from None


def _instant(query: Any, name: str) -> int | None:
    """An RFC 3339 time parameter, in microseconds since the epoch."""
    raw = query.get(name)
    if raw is None:
        return None
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(400, "invalid_request", f"{name} must be an RFC 3339 time.") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _exact(moment)


def _bounded_int(query: Any, name: str, low: int, high: int, default: int) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ApiError(400, "invalid_request", f"{name} must be a whole number {low}-{high}.")
    return int(raw)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")
