"""Fork a conversation at a run, or as it is now (runs/conversations/forks.py)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from burrow.api.deps import ConversationDep, ServicesDep
from burrow.api.errors import ApiError, not_found
from burrow.api.routes.conversations import view
from burrow.api.schemas import ConversationOut
from burrow.runs.conversations.forks import NoCheckpoint, RunNotFound, fork
from burrow.runs.conversations.runtime import RunActive
from burrow.store.events import ConversationGone
from burrow.store.forks import ForkStore

router = APIRouter(prefix="/api/conversations", tags=["forks"])


class ForkBody(BaseModel):
    run_id: str | None = Field(default=None, min_length=1, max_length=64)


@router.post("/{cid}/fork", status_code=201)
async def fork_conversation(
    conversation: ConversationDep, svc: ServicesDep, body: ForkBody | None = None
) -> ConversationOut:
    """A new conversation of the same owner and settings, with the journal before the run's
    user message and the workspace of its starting checkpoint; without `run_id`, the
    conversation as it is now (409 `run_active` while a run changes it)."""
    run_id = body.run_id if body is not None else None
    try:
        cid = await fork(svc.runtime, ForkStore(svc.db), conversation, run_id)
    except RunNotFound as exc:
        raise ApiError(404, "run_not_found", str(exc)) from exc
    except NoCheckpoint as exc:
        raise ApiError(409, "no_checkpoint", str(exc)) from exc
    except RunActive as exc:
        raise ApiError(
            409,
            "run_active",
            "A run is changing this conversation: fork it after the run ends, stop the run "
            "first, or fork at one of its earlier runs (run_id).",
        ) from exc
    except ConversationGone as exc:
        raise not_found(f"Conversation {conversation.id}") from exc
    forked = await svc.conversations.get(cid)
    if forked is None:
        raise not_found(f"Conversation {cid}")
    return await view(svc, forked)
