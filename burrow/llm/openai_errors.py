"""What went wrong with an OpenAI-compatible server, told as what the user should do.

Every message passes through `redact`, so an API key a server echoes back never reaches
the journal or the logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai

from burrow.llm.base import CONTEXT_TOO_LONG, ModelError, retry_after, stream_lost


@dataclass(frozen=True)
class SettingNames:
    """What an error tells the person to check, named where they set it: the environment
    variables by default, the settings page's fields for what was saved there."""

    api_key: str = "OPENAI_API_KEY"
    model: str = "BURROW_MODEL"
    base_url: str = "OPENAI_BASE_URL"


IN_ENVIRONMENT = SettingNames()
ON_SETTINGS_PAGE = SettingNames(
    api_key="the API key in Settings",
    model="the model name in Settings",
    base_url="the base URL in Settings",
)


def server_message(exc: openai.APIStatusError) -> str:
    """The server's own explanation, from whichever body shape it uses."""
    body: Any = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if isinstance(body.get("detail"), str):  # FastAPI-based servers
            return str(body["detail"])
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


def _error_code(exc: openai.APIStatusError) -> str:
    body: Any = exc.body
    inner = body.get("error", body) if isinstance(body, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    return code if isinstance(code, str) else ""


def status_error(
    exc: openai.APIStatusError,
    *,
    base_url: str,
    model: str,
    names: SettingNames = IN_ENVIRONMENT,
) -> ModelError:
    status = exc.status_code
    said = server_message(exc)
    if status == 401:
        return ModelError(
            f"The model server at {base_url} rejected the API key (401: {said}): check "
            f"{names.api_key}."
        )
    if status == 403:
        return ModelError(
            f"The model server at {base_url} refused the request (403: {said}): check that "
            f"{names.api_key} may use model {model!r}."
        )
    if status == 404:
        return ModelError(
            f"Model {model!r} was not found at {base_url} ({said}): set {names.model} to a "
            f"model that server offers, or {names.base_url} to the server that has it."
        )
    if status in (400, 413) and (
        _error_code(exc) == "context_length_exceeded" or "maximum context length" in said
    ):  # OpenAI names the code; vLLM and others only say it
        return ModelError(
            f"The conversation is too long for {model} ({said}): compact it or start a new "
            "conversation.",
            code=CONTEXT_TOO_LONG,
        )
    if status == 429 and _error_code(exc) == "insufficient_quota":
        return ModelError(
            f"The model server at {base_url} says the account is out of quota ({said}): "
            f"check its billing, or use another key in {names.api_key}."
        )
    if status == 429:
        return ModelError(
            f"The model server at {base_url} is rate limiting requests (429: {said}).",
            retryable=True,
            retry_after=retry_after(exc.response.headers),
        )
    if status in (408, 409) or status >= 500:
        return ModelError(
            f"The model server at {base_url} failed ({status}: {said}).", retryable=True
        )
    return ModelError(f"The model server at {base_url} rejected the request ({status}: {said}).")


def transport_error(
    exc: openai.APIConnectionError,
    *,
    base_url: str,
    started: bool,
    names: SettingNames = IN_ENVIRONMENT,
) -> ModelError:
    if started:
        return stream_lost(exc, base_url)
    cause = exc.__cause__ or exc
    detail = f"{type(cause).__name__}: {cause}".rstrip(": ")
    if isinstance(exc, openai.APITimeoutError):
        return ModelError(f"The model server at {base_url} did not answer in time.", retryable=True)
    return ModelError(
        f"Could not reach the model server at {base_url} ({detail}): check {names.base_url} "
        "and that the server is running.",
        retryable=True,
    )
