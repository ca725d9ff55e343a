"""A fake of GitHub's REST API for pull requests: records each request, answers 201 with a
number, 422 when that head already has an open pull request (as GitHub does), or 401
repeating the token for the head `echo-the-token`."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from tests.fakes.threaded import ThreadedServer


class FakeGitHub(ThreadedServer):
    thread_name = "fake-github"

    def __init__(self) -> None:
        super().__init__()
        self.pulls: list[dict[str, Any]] = []  # {path, authorization, body} per request

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def routes(self) -> list[BaseRoute]:
        return [Route("/repos/{owner}/{repo}/pulls", self._pulls, methods=["POST"])]

    async def _pulls(self, request: Request) -> JSONResponse:
        body = await request.json()
        heads = [p["body"]["head"] for p in self.pulls]
        self.pulls.append(
            {
                "path": request.url.path,
                "authorization": request.headers.get("authorization", ""),
                "body": body,
            }
        )
        if body["head"] == "echo-the-token":  # a server that repeats what it was sent
            message = f"Bad credentials: {request.headers.get('authorization')}"
            return JSONResponse({"message": message}, status_code=401)
        if body["head"] in heads:
            return JSONResponse(
                {
                    "message": "Validation Failed",
                    "errors": [{"message": f"A pull request already exists for {body['head']}."}],
                },
                status_code=422,
            )
        owner, repo = request.path_params["owner"], request.path_params["repo"]
        number = len(self.pulls)
        url = f"https://github.example/{owner}/{repo}/pull/{number}"
        return JSONResponse({"number": number, "html_url": url}, status_code=201)
