"""Bytes from a workspace, answered so that a browser never runs them."""

from __future__ import annotations

from fastapi import Response


def inert_response(data: bytes, media_type: str, *, cache_control: str) -> Response:
    """`data` as `media_type`, never sniffed into something else and, opened as a page,
    sandboxed with nothing allowed to load: workspace files are the agent's (and so the
    model's) writing."""
    return Response(
        data,
        media_type=media_type,
        headers={
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "Cache-Control": cache_control,
        },
    )
