"""The proxy's own pages: why a preview is not shown, in words a user can act on."""

from __future__ import annotations

import html
from typing import Literal

Headers = list[tuple[bytes, bytes]]

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">{refresh}<title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:15px/1.5 system-ui,sans-serif;max-width:34rem;margin:12vh auto;padding:0 1rem;
color:#222}}h1{{font-size:1.2rem}}p{{color:#555}}</style></head>
<body><h1>{title}</h1><p>{message}</p></body></html>
"""


def page(
    status: int, title: str, message: str, *, refresh: float | None = None
) -> tuple[int, Headers, bytes]:
    meta = f'<meta http-equiv="refresh" content="{refresh:g}">' if refresh else ""
    body = _TEMPLATE.format(
        refresh=meta, title=html.escape(title), message=html.escape(message)
    ).encode()
    headers: Headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    ]
    return status, headers, body


def unknown_host() -> tuple[int, Headers, bytes]:
    return page(
        404,
        "Not a preview address",
        "This address does not name a Burrow preview. Preview addresses look like "
        "http://5173-<conversation>.preview.localhost:<port>/ and are opened from Burrow.",
    )


def not_found() -> tuple[int, Headers, bytes]:
    return page(404, "Preview not found", "There is no such preview, or it is not yours.")


SignInReason = Literal["private", "expired", "used", "signed_out"]
_SIGN_IN_REASONS: dict[SignInReason, str] = {
    "private": "This preview is private.",
    "expired": "This preview link has expired.",
    "used": "This preview link has been used already; a link opens a preview once.",
    "signed_out": "The Burrow sign-in this preview was opened under has ended (signed out, "
    "password changed, or account disabled).",
}


def sign_in_needed(why: SignInReason) -> tuple[int, Headers, bytes]:
    reason = _SIGN_IN_REASONS[why]
    return page(
        401,
        "Open this preview from Burrow",
        f"{reason} Only the owner of the conversation can see it: open the preview from the "
        "conversation in Burrow, which signs you in to this address for a while.",
    )


def foreign(reason: str) -> tuple[int, Headers, bytes]:
    return page(
        403,
        "Refused: a request from another site",
        f"{reason} A preview answers its own pages, and other pages only to open it, so "
        "that one preview cannot drive another with your sign-in.",
    )


def too_many_links(*, everyone: bool) -> tuple[int, Headers, bytes]:
    if everyone:
        status, headers, body = page(
            503,
            "Too many preview links at once",
            "More preview links were opened in the last minutes than this server keeps "
            "track of. Open the preview from Burrow again in a minute.",
        )
    else:
        status, headers, body = page(
            429,
            "Too many preview links at once",
            "You opened more preview links in the last minutes than one person may. "
            "Open the preview from Burrow again in a minute.",
        )
    return status, [*headers, (b"retry-after", b"60")], body


def starting(port: int, detail: str) -> tuple[int, Headers, bytes]:
    status, headers, body = page(
        503,
        f"Waiting for port {port}",
        f"{detail} This page reloads by itself every two seconds.",
        refresh=2,
    )
    return status, [*headers, (b"retry-after", b"2")], body
