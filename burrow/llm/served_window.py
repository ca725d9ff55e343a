"""The context window an OpenAI-compatible server says it serves a model with.

OpenAI's API does not say; the local servers do, each in its own place, and an unknown
model otherwise gets the catalog's default (128,000 tokens), far past what a local server
holds: the run would never compact and the server would cut or refuse the conversation.
Asked in order, first answer wins, each with a short timeout, any failure meaning "not
said here":

- `GET {base}/models`: vLLM's `max_model_len`, OpenRouter's `context_length`, llama.cpp
  server's `meta.n_ctx_train` (its trained length, used only if nothing says more);
- `GET {root}/props`: llama.cpp server's `default_generation_settings.n_ctx`, the window it
  was started with (`-c`);
- `GET {root}/api/v0/models/{model}`: LM Studio's `loaded_context_length` (or `max_`);
- `POST {root}/api/show`: Ollama's `num_ctx` parameter, else the model's `context_length`.

Each answer is read up to MAX_BYTES (OpenRouter's list of hundreds of models is ~1 MB): a
server that sends more is taken as having said nothing.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx

TIMEOUT = 3.0
MAX_BYTES = 4 * 1024 * 1024


async def served_window(base_url: str, api_key: str | None, model: str) -> int | None:
    """Tokens the server at `base_url` (its `/v1` URL) accepts for `model`, if it says."""
    base = base_url.rstrip("/")
    root = base.removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(timeout=TIMEOUT, headers=headers) as http:
        listed = await _json(http, "GET", f"{base}/models")
        entry = _entry(listed, model)
        window = _first(entry, "max_model_len", "context_length")
        if window is None:
            props = await _json(http, "GET", f"{root}/props")
            window = _first(props.get("default_generation_settings") or {}, "n_ctx")
        if window is None:
            studio = await _json(http, "GET", f"{root}/api/v0/models/{model}")
            window = _first(studio, "loaded_context_length", "max_context_length")
        if window is None:
            shown = await _json(http, "POST", f"{root}/api/show", json={"model": model})
            window = _ollama_window(shown)
        return window or _first(entry.get("meta") or {}, "n_ctx_train")


async def offered_models(base_url: str, api_key: str | None) -> list[str] | None:
    """The model ids `GET {base}/models` lists, in its order; None if it did not answer."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(timeout=TIMEOUT, headers=headers) as http:
        listed = await _json(http, "GET", f"{base_url.rstrip('/')}/models")
    data = listed.get("data")
    if not isinstance(data, list):
        return None
    ids = [item.get("id") for item in data if isinstance(item, dict)]
    return [i for i in ids if isinstance(i, str) and 0 < len(i) <= 200]


async def _json(http: httpx.AsyncClient, method: str, url: str, **kw: Any) -> dict[str, Any]:
    """The JSON object answered, read up to MAX_BYTES; {} for anything else."""
    with contextlib.suppress(httpx.HTTPError, ValueError):
        async with http.stream(method, url, **kw) as response:
            if not response.is_success:
                return {}
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    return {}
            parsed = json.loads(body)
            return parsed if isinstance(parsed, dict) else {}
    return {}


def _entry(listed: dict[str, Any], model: str) -> dict[str, Any]:
    data = listed.get("data")
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict) and item.get("id") == model:
            return item
    return {}


def _ollama_window(shown: dict[str, Any]) -> int | None:
    parameters = shown.get("parameters")
    if isinstance(parameters, str):  # "num_ctx 8192\ntemperature 0.7", Modelfile style
        for line in parameters.splitlines():
            name, _, value = line.strip().partition(" ")
            if name == "num_ctx" and value.strip().isdigit():
                return int(value.strip())
    info = shown.get("model_info")
    lengths = [k for k in info if k.endswith(".context_length")] if isinstance(info, dict) else []
    return _first(info, *lengths) if isinstance(info, dict) else None


def _first(values: dict[str, Any], *keys: str) -> int | None:
    """The first of `keys` whose value is a positive whole number."""
    for key in keys:
        value = values.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
