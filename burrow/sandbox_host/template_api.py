"""E2B's template routes, as the SDK's `Template.build` calls them (templates.py says the
flow). All but the upload take the API key; the upload URL is its own credential, one use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from burrow.sandbox_host.templates import TemplateError, Templates

MAX_BUILD_BYTES = 512 << 10  # a build's steps (their setup is bounded again, at 64 KiB)
Reader = Callable[[Request, int], Any]  # the body as JSON, bounded


class TemplateApi:
    def __init__(self, templates: Templates, read_json: Reader) -> None:
        self.templates = templates
        self.read_json = read_json

    def routes(self, authed: Callable[[Any], Any]) -> list[Route]:
        h = authed
        base = "/templates/{template_id}"
        return [
            Route("/v3/templates", h(self.request_build), methods=["POST"]),
            Route("/templates/aliases/{alias}", h(self.alias), methods=["GET"]),
            Route(f"{base}/files/{{files_hash}}", h(self.files), methods=["GET"]),
            Route(f"{base}/files/{{files_hash}}/upload", self.upload, methods=["PUT"]),
            Route("/v2" + base + "/builds/{build_id}", h(self.start), methods=["POST"]),
            Route(f"{base}/builds/{{build_id}}/status", h(self.status), methods=["GET"]),
            Route(base, h(self.delete), methods=["DELETE"]),
        ]

    async def request_build(self, request: Request, owner: str) -> Response:
        body = await self.read_json(request, MAX_BUILD_BYTES)
        name = body.get("name") or body.get("alias")
        if not isinstance(name, str):
            raise TemplateError(400, "invalid_request", "name is required.")
        tags = body.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise TemplateError(400, "invalid_request", "tags is a list of strings.")
        template, build = self.templates.request(owner, name, tags)
        return JSONResponse(
            {
                "templateID": template.template_id,
                "buildID": build.build_id,
                "public": False,
                "names": template.names,
                "aliases": template.names,
                "tags": tags or ["default"],
            },
            status_code=202,
        )

    async def alias(self, request: Request, owner: str) -> Response:
        template = self.templates.find(owner, request.path_params["alias"])
        if template is None:
            raise TemplateError(404, "template_not_found", "No template of that name.")
        return JSONResponse({"templateID": template.template_id, "public": False})

    async def files(self, request: Request, owner: str) -> Response:
        params = request.path_params
        token = self.templates.upload_token(owner, params["template_id"], params["files_hash"])
        if token is None:
            return JSONResponse({"present": True}, status_code=201)
        url = request.url.replace(path=request.url.path + "/upload", query=f"token={token}")
        return JSONResponse({"present": False, "url": str(url)}, status_code=201)

    async def upload(self, request: Request) -> Response:
        try:
            await self.templates.receive(request.query_params.get("token", ""), request.stream())
        except TemplateError as exc:
            return _error(exc)
        return Response(status_code=200)

    async def start(self, request: Request, owner: str) -> Response:
        params = request.path_params
        body = await self.read_json(request, MAX_BUILD_BYTES)
        await self.templates.start(owner, params["template_id"], params["build_id"], body)
        return Response(status_code=202)

    async def status(self, request: Request, owner: str) -> Response:
        params = request.path_params
        raw = request.query_params.get("logsOffset", "0")
        if not raw.isdigit():
            raise TemplateError(400, "invalid_request", "logsOffset is a whole number.")
        return JSONResponse(
            self.templates.status(owner, params["template_id"], params["build_id"], int(raw))
        )

    async def delete(self, request: Request, owner: str) -> Response:
        await self.templates.delete(owner, request.path_params["template_id"])
        return Response(status_code=204)


def _error(exc: TemplateError) -> JSONResponse:
    return JSONResponse(
        {"code": exc.status, "message": exc.message, "error_code": exc.code},
        status_code=exc.status,
    )
