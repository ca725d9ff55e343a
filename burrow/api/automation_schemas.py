"""The request and response shapes of `/api/automations` (DESIGN.md §9). Strict like
budgets: a misspelt field or a budget limit left out is a 422 naming it, because an
unattended run without a hard limit is the one thing an automation must never be."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from burrow.api.schemas import RepoIn
from burrow.automations import cron

UnattendedMode = Literal["auto", "read_only", "ask"]
Result = Literal["none", "push", "pull_request"]
Concurrency = Literal["queue", "skip"]
# GitHub deliveries an automation can start on (`<event>.<action>` as GitHub names them).
# The last two only continue a conversation whose pull request the automation opened.
GithubEvent = Literal[
    "issues.labeled",
    "issue_comment.created",
    "pull_request_review.submitted",
    "check_run.completed",
]
# Who GitHub says wrote the issue or comment; "anyone" (NONE, FIRST_TIMER…) is not offered.
Association = Literal["OWNER", "MEMBER", "COLLABORATOR"]
MAX_TRIGGERS = 10


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class AutomationBudget(Strict):
    """Every limit is required: each run ends `budget_exceeded` at the first one hit."""

    steps: int = Field(ge=1, le=10_000)
    tokens: int = Field(ge=1)
    cost: float = Field(gt=0)
    wall_seconds: float = Field(gt=0, le=7 * 24 * 3600)


class ScheduleTrigger(Strict):
    schedule: str = Field(max_length=cron.MAX_LENGTH, description="5-field cron, server time")

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        try:
            cron.parse(value)
        except cron.CronError as exc:
            raise ValueError(str(exc)) from None
        return value


class HttpTrigger(Strict):
    http: Literal[True]


class GithubSpec(Strict):
    repository: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
    )
    events: list[GithubEvent] = Field(min_length=1, max_length=10)
    label: str | None = Field(default=None, min_length=1, max_length=100)
    """issues.labeled: only this label starts work; None: any label."""
    mention: str | None = Field(default=None, pattern=r"^@?[A-Za-z0-9-]{1,39}$")
    """issue_comment.created: the handle a comment must mention."""
    authors: list[Association] = Field(
        default=["OWNER", "MEMBER", "COLLABORATOR"], min_length=1, max_length=3
    )
    webhook_secret: str | None = Field(default=None, min_length=1, max_length=128)
    """The name of the owner's secret holding this repository's webhook secret; None: the
    server-wide BURROW_GITHUB_WEBHOOK_SECRET."""


class PullRequestSpec(Strict):
    """How `result: pull_request` reaches GitHub."""

    secret: str | None = Field(default=None, min_length=1, max_length=128)
    """The owner's secret holding a GitHub token for the API; None: the repo's secret."""
    base: str | None = Field(default=None, min_length=1, max_length=255)
    """The branch it merges into; None: the repo's ref, else `main`."""


class GithubTrigger(Strict):
    github: GithubSpec


Trigger = ScheduleTrigger | HttpTrigger | GithubTrigger
Name = Annotated[str, Field(min_length=1, max_length=100)]


class AutomationIn(Strict):
    name: Name
    prompt: str = Field(min_length=1, max_length=32_000)
    repo: RepoIn | None = None
    environment: str | None = Field(default=None, max_length=32)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    approval_mode: UnattendedMode
    budget: AutomationBudget
    result: Result = "none"
    attempts: int | None = Field(default=None, ge=1, le=4)
    triggers: list[Trigger] = Field(default=[], max_length=MAX_TRIGGERS)
    concurrency: Concurrency = "queue"
    """A trigger while its previous run still goes: `queue` it after, or `skip` it."""
    pull_request: PullRequestSpec | None = None


class AutomationPatch(Strict):
    """The fields given replace the stored ones; the result is checked as a whole."""

    name: Name | None = None
    prompt: str | None = Field(default=None, min_length=1, max_length=32_000)
    repo: RepoIn | None = None
    environment: str | None = Field(default=None, max_length=32)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    approval_mode: UnattendedMode | None = None
    budget: AutomationBudget | None = None
    result: Result | None = None
    attempts: int | None = Field(default=None, ge=1, le=4)
    triggers: list[Trigger] | None = Field(default=None, max_length=MAX_TRIGGERS)
    concurrency: Concurrency | None = None
    pull_request: PullRequestSpec | None = None


class ScheduleOut(BaseModel):
    schedule: str
    next_fire_at: datetime | None  # in the server's timezone


class AutomationOut(BaseModel):
    id: str
    name: str
    prompt: str
    repo: dict[str, Any] | None
    environment: str | None
    model: str | None
    approval_mode: UnattendedMode
    budget: AutomationBudget
    result: Result
    attempts: int | None
    triggers: list[dict[str, Any]]
    concurrency: Concurrency
    pull_request: dict[str, Any] | None
    timezone: str
    """The server's timezone, in which schedules are read (e.g. `UTC`, `CET`)."""
    next_fire_at: datetime | None
    """The soonest of its schedules' next ticks, in the server's timezone; null: none."""
    runs: list[str]
    """The conversations it started, newest first."""
    created_at: datetime
    updated_at: datetime


class AutomationCreated(AutomationOut):
    token: str
    """For `POST /api/automations/{id}/fire`: shown this once, stored only as a hash."""


class PullRequestRef(BaseModel):
    number: int
    url: str | None


class AutomationRunOut(BaseModel):
    """One conversation an automation started, and what became of its result."""

    conversation_id: str
    title: str
    status: str
    """The conversation's: `idle` once its run ended, `running`, `waiting_approval`."""
    created_at: datetime
    result: Literal["pending", "none", "pushed", "opened", "updated", "failed", "skipped"]
    detail: str | None
    """Why it failed or was skipped, in words."""
    branch: str | None
    commit: str | None
    pull_request: PullRequestRef | None
