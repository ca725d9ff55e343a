"""What went wrong with the Anthropic API, told as what the user should do.

The API names every error with a type (`overloaded_error`, `rate_limit_error`, ...), in
the HTTP error body and in an `error` event inside a stream (which arrives after a 200),
so the type decides, and the status is the fallback.
"""

from __future__ import annotations

from typing import Any

import anthropic

from burrow.llm.base import CONTEXT_TOO_LONG, ModelError, retry_after, stream_lost

STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _error_of(exc: anthropic.APIStatusError) -> tuple[str, str]:
    """(type, message) from the body, whichever shape the server used."""
    body: Any = exc.body
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict):
        kind = inner.get("type")
        message = inner.get("message")
        if isinstance(kind, str) and isinstance(message, str):
            return kind, message
    if isinstance(body, str) and body.strip():
        return STATUS_TYPES.get(exc.status_code, ""), body.strip()[:500]
    return STATUS_TYPES.get(exc.status_code, ""), exc.message


def status_error(
    exc: anthropic.APIStatusError, *, base_url: str, model: str, key_in_settings: bool = False
) -> ModelError:
    """`key_in_settings`: the key was typed into (or saved from) the settings page's field,
    so that field is what to check, not an environment variable the person never set."""
    kind, said = _error_of(exc)
    status = exc.status_code
    if kind == "authentication_error":
        check = (
            "check the API key in Settings (copy it again from the Anthropic console)"
            if key_in_settings
            else "check ANTHROPIC_API_KEY, or set the key on the settings page"
        )
        return ModelError(
            f"The Anthropic API at {base_url} rejected the API key ({said}): {check}."
        )
    if kind == "permission_error":
        return ModelError(
            f"The Anthropic API at {base_url} refused the request ({said}): check that the "
            f"API key may use model {model!r}."
        )
    if kind == "billing_error":
        return ModelError(
            f"The Anthropic API at {base_url} refused the request for billing ({said}): "
            "check the account's credits, or use another "
            + ("API key in Settings." if key_in_settings else "ANTHROPIC_API_KEY.")
        )
    if kind == "not_found_error":
        return ModelError(
            f"Model {model!r} was not found at {base_url} ({said}): set BURROW_MODEL to "
            "anthropic:<a model the API offers>, e.g. anthropic:claude-sonnet-4-5."
        )
    if kind == "invalid_request_error" and "prompt is too long" in said:
        return ModelError(
            f"The conversation is too long for {model} ({said}): compact it or start a new "
            "conversation.",
            code=CONTEXT_TOO_LONG,
        )
    if kind == "request_too_large":
        return ModelError(
            f"The request is too large for the Anthropic API ({said}): large files or images "
            "in the conversation may be the cause; compact it or start a new conversation.",
            code=CONTEXT_TOO_LONG,
        )
    if kind == "rate_limit_error":
        return ModelError(
            f"The Anthropic API at {base_url} is rate limiting requests (429: {said}).",
            retryable=True,
            retry_after=retry_after(exc.response.headers),
        )
    if kind == "overloaded_error":
        return ModelError(
            f"The Anthropic API at {base_url} is overloaded (529: {said}).",
            retryable=True,
            retry_after=retry_after(exc.response.headers),
        )
    if kind == "api_error" or status in (408, 409) or status >= 500:
        return ModelError(
            f"The Anthropic API at {base_url} failed ({status}: {said}).", retryable=True
        )
    return ModelError(f"The Anthropic API at {base_url} rejected the request ({status}: {said}).")


def transport_error(
    exc: anthropic.APIConnectionError, *, base_url: str, started: bool
) -> ModelError:
    if started:
        return stream_lost(exc, base_url)
    cause = exc.__cause__ or exc
    detail = f"{type(cause).__name__}: {cause}".rstrip(": ")
    if isinstance(exc, anthropic.APITimeoutError):
        return ModelError(
            f"The Anthropic API at {base_url} did not answer in time.", retryable=True
        )
    return ModelError(
        f"Could not reach the Anthropic API at {base_url} ({detail}): check ANTHROPIC_BASE_URL "
        "and the network.",
        retryable=True,
    )
