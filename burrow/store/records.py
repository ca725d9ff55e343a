"""Plain records the store hands out; no ORM objects leave this package."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from burrow.llm.base import Usage


def utc(value: datetime) -> datetime:
    """A stored datetime as an aware UTC one (SQLite hands them back naive)."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class User:
    id: str
    username: str
    is_admin: bool


@dataclass(frozen=True)
class Conversation:
    id: str
    owner_id: str
    title: str
    profile: str
    approval_mode: str
    created_at: datetime
    updated_at: datetime
    status: str
    sandbox_status: str
    last_seq: int
    usage: Usage  # everything its runs have spent
    secrets: tuple[str, ...] = ()  # names of the owner's secrets its commands get
    model: str | None = None  # `[provider:]model`; None: the server's model
    budget: dict[str, float] = field(default_factory=dict)  # overrides of the run limits
    network: str | None = None  # "none" | "egress"; None: the server's default policy
    environment: str | None = None  # what its sandbox starts from; None: the host's system
    automation_id: str | None = None  # the automation that started it; None: a person


@dataclass(frozen=True)
class NewEvent:
    type: str
    data: dict[str, Any]
    run_id: str | None = None


@dataclass(frozen=True)
class Event:
    """A committed journal entry. `data_json` is the stored text, reused as-is on the wire."""

    conversation_id: str
    seq: int
    type: str
    ts: str
    run_id: str | None
    data_json: str

    @property
    def data(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.data_json)
        return value

    def envelope_json(self) -> str:
        """The §4 envelope, built without decoding and re-encoding `data`."""
        run = json.dumps(self.run_id)
        return (
            f'{{"seq":{self.seq},"type":"{self.type}","ts":"{self.ts}",'
            f'"run_id":{run},"data":{self.data_json}}}'
        )

    @functools.cached_property
    def sse_frame(self) -> bytes:
        """The SSE frame, encoded once however many clients receive it."""
        return f"id: {self.seq}\nevent: {self.type}\ndata: {self.envelope_json()}\n\n".encode()


@dataclass
class ProjectionChange:
    """How a batch of events moves the conversation row (status, usage, sandbox)."""

    status: str | None = None
    sandbox_status: str | None = None
    usage: Usage = field(default_factory=Usage)  # added to the row's totals
    # Whether the batch is conversation activity (messages, runs), which orders the list;
    # sandbox wakes and hibernations are not.
    activity: bool = False
