"""The window a local model server says it serves a model with, in each server's own place."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from burrow.llm.served_window import served_window
from burrow.ports import free_port
from tests.fakes.served import served


def server(routes: dict[tuple[str, str], Any]) -> Starlette:
    """Answers `routes[(method, path)]` as JSON; anything else is a 404, as on a server
    that has no such endpoint."""

    async def answer(request: Request) -> JSONResponse:
        body = routes.get((request.method, request.url.path))
        if body is None:
            return JSONResponse({"error": "not found"}, 404)
        return JSONResponse(body(await request.json()) if callable(body) else body)

    paths = {path for _, path in routes} | {"/v1/models"}
    return Starlette(routes=[Route(p, answer, methods=["GET", "POST"]) for p in paths])


async def window(routes: dict[tuple[str, str], Any], model: str = "m") -> int | None:
    port = free_port()
    async with served(server(routes), port):
        return await served_window(f"http://127.0.0.1:{port}/v1", "k", model)


async def test_vllm_says_max_model_len_in_its_model_list() -> None:
    listed = {"data": [{"id": "other", "max_model_len": 1}, {"id": "m", "max_model_len": 32768}]}
    assert await window({("GET", "/v1/models"): listed}) == 32768


async def test_openrouter_says_context_length_in_its_model_list() -> None:
    listed = {"data": [{"id": "m", "context_length": 200000}]}
    assert await window({("GET", "/v1/models"): listed}) == 200000


async def test_llama_cpp_says_the_window_it_runs_with_before_the_trained_one() -> None:
    listed = {"data": [{"id": "m", "meta": {"n_ctx_train": 131072}}]}
    props = {"default_generation_settings": {"n_ctx": 4096}}
    assert await window({("GET", "/v1/models"): listed, ("GET", "/props"): props}) == 4096
    assert await window({("GET", "/v1/models"): listed}) == 131072  # no /props: the trained


async def test_lm_studio_says_the_loaded_window() -> None:
    studio = {"id": "m", "loaded_context_length": 8192, "max_context_length": 32768}
    assert await window({("GET", "/api/v0/models/m"): studio}) == 8192


async def test_ollama_says_num_ctx_else_the_models_length() -> None:
    def show(with_num_ctx: bool) -> Any:
        def body(asked: dict[str, Any]) -> dict[str, Any]:
            assert asked == {"model": "llama3.2:3b"}
            parameters = "num_ctx 16384\ntemperature 0.7" if with_num_ctx else "temperature 1"
            return {"parameters": parameters, "model_info": {"llama.context_length": 131072}}

        return body

    assert await window({("POST", "/api/show"): show(True)}, "llama3.2:3b") == 16384
    assert await window({("POST", "/api/show"): show(False)}, "llama3.2:3b") == 131072


async def test_a_server_that_says_nothing_or_nonsense_gives_none() -> None:
    nonsense = {"data": [{"id": "m", "max_model_len": "lots", "context_length": True}]}
    props = {"default_generation_settings": {"n_ctx": -1}}
    assert await window({("GET", "/v1/models"): nonsense, ("GET", "/props"): props}) is None
    assert await window({}) is None
    assert await served_window(f"http://127.0.0.1:{free_port()}/v1", None, "m") is None
