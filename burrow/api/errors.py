"""Every error leaves the API as {"error": {"code", "message"}} with a fitting status."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException

from burrow.runs.workspace.quotas import QuotaExceeded
from burrow.sandbox.backend import ErrorCode, SandboxError
from burrow.store.database import storage_trouble
from burrow.store.passwords import PasswordsBusy

log = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers  # e.g. Retry-After on a 429 or 503


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} was not found.")


def nul_in_path() -> ApiError:
    """A path no file can have; passed on, it fails deep down as something else."""
    return ApiError(
        400,
        "invalid_path",
        "The path contains a NUL byte, which no file name can hold: send it without one.",
    )


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = {"error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


SANDBOX_STATUS = {
    ErrorCode.PATH_ESCAPE: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.IS_A_DIRECTORY: 400,
    ErrorCode.NOT_A_FILE: 400,
    ErrorCode.NOT_A_DIRECTORY: 400,
    ErrorCode.TOO_LARGE: 413,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.NOT_SUPPORTED: 501,
}


def _describe(errors: list[Any]) -> str:
    parts = []
    for e in errors:
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
        if e.get("type") == "json_invalid":
            return f"The request body is not valid JSON: {e.get('ctx', {}).get('error', '')}"
        parts.append(f"{loc or 'body'}: {e.get('msg', 'invalid')}")
    return "; ".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(QuotaExceeded)  # before SandboxError in a sandbox quota's MRO
    async def _quota(_: Request, exc: QuotaExceeded) -> JSONResponse:
        return error_response(429, exc.error_code, str(exc), {"Retry-After": "5"})

    @app.exception_handler(PasswordsBusy)  # a login flood: come back in a second
    async def _busy(_: Request, exc: PasswordsBusy) -> JSONResponse:
        return error_response(503, "passwords_busy", str(exc), {"Retry-After": "1"})

    @app.exception_handler(SandboxError)
    async def _sandbox(_: Request, exc: SandboxError) -> JSONResponse:
        return error_response(SANDBOX_STATUS.get(exc.code, 503), exc.code.value, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        invalid_json = any(e.get("type") == "json_invalid" for e in errors)
        code = "invalid_json" if invalid_json else "invalid_request"
        return error_response(400 if invalid_json else 422, code, _describe(errors))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail))

    @app.exception_handler(DBAPIError)  # the database, failing for an outside reason?
    async def _database(request: Request, exc: DBAPIError) -> JSONResponse:
        trouble = storage_trouble(exc)
        if trouble is None:
            return await _internal(request, exc)
        log.warning("%s %s: %s", request.method, request.url.path, trouble)
        status, code = (503, "database_busy") if trouble.kind == "busy" else (507, "storage_full")
        return error_response(status, code, str(trouble), {"Retry-After": "5"})

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal", "Internal server error; see the server log.")
