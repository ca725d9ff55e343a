"""`POST /api/webhooks/github` through the real server, with deliveries shaped and signed
as GitHub sends them: the signature checked, a replay ignored, a stranger's comment
ignored, a huge body refused, and only the events and labels a trigger names start work."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.api.harness import RunningServer, running_server
from tests.api.test_automation_fire import first_message, made, scripted

SECRET = "webhook-secret-of-the-repository"
TRIGGER = {
    "github": {
        "repository": "octo/repo",
        "events": ["issues.labeled", "issue_comment.created"],
        "label": "burrow",
        "mention": "@burrow-bot",
    }
}


def labeled(association: str = "OWNER", label: str = "burrow") -> dict[str, Any]:
    return {
        "action": "labeled",
        "label": {"name": label},
        "issue": {"number": 7, "title": "Crash on start", "author_association": association},
        "repository": {"full_name": "octo/repo"},
        "sender": {"login": "octocat"},
    }


def commented(body: str, association: str) -> dict[str, Any]:
    return {
        "action": "created",
        "issue": {"number": 7, "title": "Crash on start", "author_association": "NONE"},
        "comment": {"body": body, "author_association": association},
        "repository": {"full_name": "octo/repo"},
    }


async def deliver(
    srv: RunningServer,
    event: str,
    payload: dict[str, Any] | bytes,
    *,
    delivery: str | None = None,
    secret: str = SECRET,
    signature: str | None = None,
) -> httpx.Response:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": signature if signature is not None else f"sha256={digest}",
    }
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as github:
        return await github.post("/api/webhooks/github", content=body, headers=headers)


async def marked(srv: RunningServer, aid: str) -> list[str]:
    listed = (await srv.client.get("/api/conversations")).json()
    return [c["id"] for c in listed if c["automation_id"] == aid]


async def test_a_signed_label_starts_a_run_once_and_a_replay_starts_nothing(
    tmp_path: Path,
) -> None:
    async with running_server(tmp_path, scripted, github_webhook_secret=SECRET) as srv:
        aid, _ = await made(
            srv.client, prompt="Fix #{{issue.number}}: {{issue.title}}", triggers=[TRIGGER]
        )
        delivery = str(uuid.uuid4())
        response = await deliver(srv, "issues", labeled(), delivery=delivery)
        assert response.status_code == 202, response.text
        [fired] = response.json()["started"]
        await srv.run_finished(fired["conversation_id"], fired["run_id"])
        assert await first_message(srv, fired["conversation_id"]) == "Fix #7: Crash on start"

        replay = await deliver(srv, "issues", labeled(), delivery=delivery)
        assert replay.status_code == 202 and replay.json() == {
            "started": [],
            "ignored": "replayed",
        }
        other_label = await deliver(srv, "issues", labeled(label="wontfix"))
        assert other_label.json()["started"] == []
        assert await marked(srv, aid) == [fired["conversation_id"]]


async def test_bad_or_missing_signatures_are_refused_with_401(tmp_path: Path) -> None:
    async with running_server(tmp_path, scripted, github_webhook_secret=SECRET) as srv:
        aid, _ = await made(srv.client, triggers=[TRIGGER])
        wrong = await deliver(srv, "issues", labeled(), secret="not-the-secret-at-all")
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "bad_signature"
        assert (await deliver(srv, "issues", labeled(), signature="")).status_code == 401
        assert (await deliver(srv, "issues", labeled(), signature="sha1=abc")).status_code == 401
        # A body changed after signing: the signature was of the other body.
        body = json.dumps(labeled()).encode()
        digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        tampered = body.replace(b"OWNER", b"NONE_")
        forged = await deliver(srv, "issues", tampered, signature=f"sha256={digest}")
        assert forged.status_code == 401
        assert await marked(srv, aid) == []


async def test_only_members_mentioning_the_handle_start_work(tmp_path: Path) -> None:
    async with running_server(tmp_path, scripted, github_webhook_secret=SECRET) as srv:
        aid, _ = await made(srv.client, triggers=[TRIGGER])
        stranger = await deliver(srv, "issue_comment", commented("@burrow-bot fix it", "NONE"))
        assert stranger.status_code == 202 and stranger.json()["started"] == []
        first_timer = commented("@burrow-bot please", "FIRST_TIME_CONTRIBUTOR")
        assert (await deliver(srv, "issue_comment", first_timer)).json()["started"] == []
        no_mention = commented("burrow-bot, fix it (@burrow-botanist)", "MEMBER")
        assert (await deliver(srv, "issue_comment", no_mention)).json()["started"] == []
        strangers_issue = await deliver(srv, "issues", labeled(association="NONE"))
        assert strangers_issue.json()["started"] == []
        assert await marked(srv, aid) == []
        member = await deliver(srv, "issue_comment", commented("Hey @burrow-bot fix", "MEMBER"))
        assert len(member.json()["started"]) == 1


async def test_huge_bodies_floods_and_an_unset_secret_are_bounded(tmp_path: Path) -> None:
    async with running_server(tmp_path, scripted) as srv:
        off = await deliver(srv, "issues", labeled())
        assert off.status_code == 404 and "BURROW_GITHUB_WEBHOOK_SECRET" in off.text
    async with running_server(tmp_path, scripted, github_webhook_secret=SECRET) as srv:
        aid, _ = await made(srv.client, triggers=[TRIGGER])
        huge = json.dumps({**labeled(), "pad": "a" * (1024 * 1024)}).encode()
        assert (await deliver(srv, "issues", huge)).status_code == 413
        flood = await asyncio.gather(
            *(
                deliver(srv, "issues", labeled(), secret="wrong-secret-for-flood")
                for _ in range(130)
            )
        )
        codes = [r.status_code for r in flood]
        assert codes.count(401) == 119 and codes.count(429) == 11  # the huge one counted
        assert await marked(srv, aid) == []
