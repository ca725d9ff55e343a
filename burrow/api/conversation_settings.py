"""A conversation's own settings at the edge: its model and its budget (DESIGN.md §8).

Checked here so a bad value is a 400 saying what to send, never a run that fails later.
"""

from __future__ import annotations

from typing import Any

from burrow.api.errors import ApiError
from burrow.api.schemas import Budget
from burrow.runs.journal import events as ev
from burrow.runs.loop.hooks.attachments import MAX_ATTACHMENTS, BadPath, workspace_path
from burrow.services import Services
from burrow.store.records import Conversation


def checked_model(svc: Services, model: str) -> str:
    """`model` as stored, or a 400 saying why the server cannot use it."""
    model = model.strip()
    problem = svc.models.problem_with(model)
    if problem is not None:
        raise ApiError(400, "invalid_model", f"Model {model!r} cannot be used: {problem}")
    return model


def attachment_paths(paths: list[str]) -> list[str]:
    """The workspace paths of a message's attachments, normalised, or a 400."""
    if len(paths) > MAX_ATTACHMENTS:
        raise ApiError(400, "too_many_attachments", f"Attach at most {MAX_ATTACHMENTS} files.")
    try:
        return [workspace_path(p) for p in paths]
    except BadPath as exc:
        raise ApiError(400, "invalid_path", f"Attachment: {exc}") from exc


class ConversationSettings:
    """One PATCH: the `update` arguments for model and budget, then what to announce."""

    def __init__(self, svc: Services, conversation: Conversation) -> None:
        self._svc = svc
        self._conversation = conversation
        self._changed_model: tuple[str | None] | None = None
        self._budget: dict[str, float] | None = None

    def model(self, model: str | None) -> dict[str, Any]:
        if model is None:
            return {}
        chosen = checked_model(self._svc, model) if model.strip() else None
        if chosen != self._conversation.model:
            self._changed_model = (chosen,)
        return {"model": chosen}

    def budget(self, budget: Budget | None) -> dict[str, Any]:
        if budget is None:
            return {}
        merged = {**self._conversation.budget, **budget.model_dump(exclude_unset=True)}
        self._budget = {k: v for k, v in merged.items() if v is not None}
        return {"budget": self._budget}

    async def announce(self) -> None:
        """Journal a model change (the next run uses it); hand a new budget to the run
        going now, which applies it at its next check."""
        cid = self._conversation.id
        if self._changed_model is not None:
            (chosen,) = self._changed_model
            shown = chosen or self._svc.models.config.model or ""
            await self._svc.journal.append(cid, ev.make(ev.ModelChanged(model=shown)))
        if self._budget is not None:
            self._svc.runtime.budget_changed(cid, self._budget)
