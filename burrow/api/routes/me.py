"""The caller's own account: changing its password."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from burrow.api import session_cookie
from burrow.api.deps import ServicesDep, UserDep, stream_cap
from burrow.api.errors import ApiError
from burrow.api.streams import SIGNED_OUT
from burrow.api.throttle import password_attempt
from burrow.store.accounts import token_digest

router = APIRouter(prefix="/api/me", tags=["me"])

MIN_PASSWORD = 8  # as for accounts an administrator creates (routes/users.py)


class PasswordChange(BaseModel):
    current: str = Field(min_length=1, max_length=1000)
    new: str = Field(max_length=1000)


@router.post("/password", status_code=204)
async def change_password(
    body: PasswordChange, request: Request, user: UserDep, svc: ServicesDep
) -> Response:
    """Checked like a login (same throttle, same hashing pool); on success every other
    browser session of the user ends, this one stays, and so do their open streams."""
    if len(body.new) < MIN_PASSWORD:
        raise ApiError(
            400,
            "password_too_short",
            f"The new password has {len(body.new)} characters: use at least {MIN_PASSWORD}.",
        )
    async with await password_attempt(request, user.username) as attempt:
        if not await svc.accounts.check_password(user.id, body.current):
            attempt.failed()
            raise ApiError(
                400, "wrong_password", "The current password is wrong: nothing was changed."
            )
        attempt.succeeded()
    if body.new == body.current:
        raise ApiError(
            400, "password_unchanged", "The new password is the current one: choose another."
        )
    kept = session_cookie.read(request)
    await svc.accounts.change_password(user.id, body.new, keep=kept)
    # The other sessions' streams end with them; API tokens stay valid, so do theirs.
    keep = {token_digest(kept or "")} | {
        t.token_hash for t in await svc.accounts.api_tokens(user.id)
    }
    stream_cap(request).end(SIGNED_OUT, user_id=user.id, keep=keep)
    return Response(status_code=204)
