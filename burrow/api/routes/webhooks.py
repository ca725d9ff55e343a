"""`POST /api/webhooks/github` (DESIGN.md §9): GitHub deliveries that start automations.

A delivery is believed only when its `X-Hub-Signature-256` is the HMAC-SHA256 of its exact
body under the secret of that repository's connection: the secret an automation's GitHub
trigger names (`webhook_secret`, one of its owner's secrets) for the delivery's
repository, or, for a trigger that names none, BURROW_GITHUB_WEBHOOK_SECRET. An automation
acts only on a delivery signed with its own connection's secret, so one user's secret for
a repository never starts another user's automation; a delivery no candidate secret signs
is 401. It is taken only once: its `X-GitHub-Delivery` id is stored, and a replay is
answered 202 and starts nothing.

Then each such automation whose trigger names the delivery's event acts:
`issues.labeled` (the trigger's `label`, or any) and `issue_comment.created` mentioning the
trigger's `mention` start a new conversation, except that a comment on a pull request the
automation opened continues that pull request's conversation (the pull-request loop), as do
`pull_request_review.submitted` with state `changes_requested` and `check_run.completed`
with conclusion `failure` on the commit the automation last pushed to its branch. Only
authors GitHub marks as one of the trigger's `authors` (OWNER, MEMBER, COLLABORATOR) start
or continue work, so a stranger's comment spends nothing; a check run has no author, and
counts only on Burrow's own commit. The body is at most MAX_BODY bytes (413), and
deliveries count in a sliding window per client address (120 a minute)."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel

from burrow.api.errors import ApiError
from burrow.api.firing import Fired, follow, raw_body, start, webhook_throttle
from burrow.api.throttle import counted
from burrow.services import Services
from burrow.store.automations import Automation, AutomationStore

router = APIRouter(prefix="/api/webhooks", tags=["automations"])

MAX_BODY = 1024 * 1024  # GitHub's own payload cap is 25 MB; an issue event is a few KiB
KEEP_DELIVERIES = timedelta(days=30)
MAX_FEEDBACK = 20_000  # characters of a review, comment or check's output in a message


class Delivery(BaseModel):
    started: list[Fired]
    ignored: str | None = None  # why nothing started, when nothing did


def signed(secret: str, body: bytes, header: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode())


def _mentions(text: str, handle: str) -> bool:
    name = re.escape(handle.lstrip("@"))
    return re.search(rf"(?<![\w-])@{name}(?![\w-])", text, re.IGNORECASE) is not None


def _spec(automation: Automation, repository: str) -> dict[str, Any] | None:
    """Its GitHub trigger for `repository` (the first one, as its connection)."""
    for trigger in automation.triggers:
        spec = trigger.get("github")
        if spec and spec["repository"].lower() == repository.lower():
            return dict(spec)
    return None


@dataclass(frozen=True)
class Start:
    """A new conversation from the trigger's prompt."""


@dataclass(frozen=True)
class Continue:
    """The pull-request loop: a further run in the conversation that opened the PR."""

    conversation_id: str
    message: str


def _quoted(text: Any) -> str:
    return str(text or "").strip()[:MAX_FEEDBACK] or "(empty)"


async def action(
    store: AutomationStore, automation: Automation, repository: str, event: str, p: dict[str, Any]
) -> Start | Continue | None:
    """What `automation` does with the delivery, or None."""
    spec = _spec(automation, repository)
    if spec is None or event not in spec["events"]:
        return None
    authors = set(spec.get("authors") or ())
    if event == "issues.labeled":
        issue = p.get("issue") or {}
        label = (p.get("label") or {}).get("name")
        # Labelling needs triage rights on the repository; the issue's author is checked
        # too, so a stranger's issue labelled by a bot does not start work.
        if issue.get("author_association") not in authors:
            return None
        if spec.get("label") is not None and label != spec["label"]:
            return None
        return Start()
    if event == "issue_comment.created":
        comment, issue = p.get("comment") or {}, p.get("issue") or {}
        if comment.get("author_association") not in authors:
            return None
        mention = spec.get("mention")
        if mention is not None and not _mentions(str(comment.get("body") or ""), mention):
            return None
        number = issue.get("number")
        if issue.get("pull_request") and isinstance(number, int):
            run = await store.run_by_pull(automation.id, repository, number)
            if run is not None:
                who = (comment.get("user") or {}).get("login") or "someone"
                message = (
                    f"A comment on the pull request #{number} from @{who} (quoted as written):"
                    f"\n\n{_quoted(comment.get('body'))}\n\nAddress it in this branch."
                )
                return Continue(run.conversation_id, message)
        return Start()
    if event == "pull_request_review.submitted":
        review, pull = p.get("review") or {}, p.get("pull_request") or {}
        if str(review.get("state") or "").lower() != "changes_requested":
            return None
        if review.get("author_association") not in authors:
            return None
        number = pull.get("number")
        if not isinstance(number, int):
            return None
        run = await store.run_by_pull(automation.id, repository, number)
        if run is None:
            return None
        who = (review.get("user") or {}).get("login") or "a reviewer"
        message = (
            f"@{who} requested changes on the pull request #{number} (quoted as written):"
            f"\n\n{_quoted(review.get('body'))}\n\nMake them in this branch."
        )
        return Continue(run.conversation_id, message)
    if event == "check_run.completed":
        check = p.get("check_run") or {}
        if check.get("conclusion") != "failure":
            return None
        branch = (check.get("check_suite") or {}).get("head_branch")
        if not isinstance(branch, str):
            return None
        run = await store.run_by_branch(automation.id, repository, branch)
        # Only on the commit Burrow pushed last: a check of anyone else's commit (a fork's
        # branch of the same name, an older push) spends nothing.
        if run is None or not run.commit or check.get("head_sha") != run.commit:
            return None
        output = check.get("output") or {}
        log = "\n".join(str(output.get(k) or "") for k in ("title", "summary", "text")).strip()
        message = (
            f"The check {str(check.get('name') or '')[:200]!r} failed on {run.commit[:12]} "
            f"of {branch}. Its output (quoted as written):\n\n{_quoted(log)}\n\nFix it."
        )
        return Continue(run.conversation_id, message)
    return None


async def connection_secret(svc: Services, automation: Automation, repository: str) -> str | None:
    """The secret that signs this repository's deliveries for `automation`."""
    spec = _spec(automation, repository) or {}
    name = spec.get("webhook_secret")
    if name is None:
        return svc.settings.github_webhook_secret
    return await svc.secrets.value(automation.owner_id, name)


@router.post("/github", status_code=202)
async def github_webhook(request: Request) -> Delivery:
    svc: Services = request.app.state.services
    runner = svc.automations
    assert runner is not None
    client = request.client.host if request.client else "unknown"
    with counted(webhook_throttle(request), client, "github", "too_many_deliveries", "deliveries"):
        body = await raw_body(request, MAX_BODY)
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            payload = None
        # Read before the signature is checked only to choose the secrets to check it with.
        repository = ""
        if isinstance(payload, dict) and isinstance(payload.get("repository"), dict):
            repository = str(payload["repository"].get("full_name") or "")[:201]
        header = request.headers.get("x-hub-signature-256", "")
        server_secret = svc.settings.github_webhook_secret
        candidates = [a for a in await runner.store.with_github() if _spec(a, repository)]
        secrets_of = {a.id: await connection_secret(svc, a, repository) for a in candidates}
        if server_secret is None and not any(secrets_of.values()):
            raise ApiError(  # 404: there is no receiver here, rather than one in trouble
                404,
                "webhooks_off",
                "Set BURROW_GITHUB_WEBHOOK_SECRET, or name a webhook_secret in an "
                "automation's GitHub trigger, to receive GitHub webhooks.",
            )
        believed = [a for a in candidates if (s := secrets_of[a.id]) and signed(s, body, header)]
        if not believed and not (server_secret and signed(server_secret, body, header)):
            raise ApiError(401, "bad_signature", "X-Hub-Signature-256 does not match the body.")
        delivery = request.headers.get("x-github-delivery", "")
        if not 1 <= len(delivery) <= 100:
            raise ApiError(400, "no_delivery_id", "X-GitHub-Delivery is required.")
        if not await runner.store.first_delivery(delivery, KEEP_DELIVERIES):
            return Delivery(started=[], ignored="replayed")
        if payload is None:
            raise ApiError(400, "invalid_json", "The body is not valid JSON.")
        if not isinstance(payload, dict):
            raise ApiError(422, "invalid_payload", "The payload must be a JSON object.")
        event = f"{request.headers.get('x-github-event', '')}.{payload.get('action', '')}"
        started = []
        for automation in believed:
            wanted = await action(runner.store, automation, repository, event, payload)
            try:
                if isinstance(wanted, Start):
                    started.append(await start(svc, automation, payload))
                elif isinstance(wanted, Continue):
                    started.append(
                        await follow(svc, automation, wanted.conversation_id, wanted.message)
                    )
            except ApiError:  # skipped, queue full, its repo unusable: the next one
                continue
        return Delivery(started=started, ignored=None if started else "no automation wants it")
