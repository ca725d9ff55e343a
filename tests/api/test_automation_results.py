"""An automation's result and the pull-request loop through the real server, a real
sandbox, a real git remote (`git http-backend` behind basic auth, reached through the
egress fence: tests/api/test_git.py's) and a fake GitHub on 127.0.0.1 that speaks the REST
shapes: a labelled issue opens a pull request of a pushed branch; a "changes requested"
review continues THAT conversation, pushes a new commit to the same branch and comments
on the pull request; a failed check on Burrow's commit does the same; strangers, forged
signatures, other users' secrets and replays spend nothing; a push that fails is recorded."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, running_server
from tests.api.test_automation_fire import fire
from tests.api.test_automations import automation
from tests.api.test_git import GITHUB_TOKEN, PASSWORD, GitRemote, git_remote, sh
from tests.api.test_github_webhook import deliver
from tests.api.test_secrets import put_secret, second_user
from tests.fakes.github_server import FakeGitHub

__all__ = ["git_remote"]  # the module's fixture, used here by name

HOOK = "per-repository-webhook-secret"
REPOSITORY = "acme/widget"


class LoopGitHub(FakeGitHub):
    """FakeGitHub plus the two calls the loop makes: the open pull requests of a head, and
    a comment on one."""

    def __init__(self) -> None:
        super().__init__()
        self.comments: list[dict[str, Any]] = []

    def routes(self) -> list[BaseRoute]:
        return [
            *super().routes(),
            Route("/repos/{owner}/{repo}/pulls", self._open_pulls, methods=["GET"]),
            Route("/repos/{owner}/{repo}/issues/{number}/comments", self._comment,
                  methods=["POST"]),
        ]  # fmt: skip

    async def _open_pulls(self, request: Request) -> JSONResponse:
        head = request.query_params.get("head", "").partition(":")[2]
        found = [
            {"number": n, "html_url": f"https://github.example/acme/widget/pull/{n}"}
            for n, p in enumerate(self.pulls, 1)
            if p["body"]["head"] == head
        ]
        return JSONResponse(found)

    async def _comment(self, request: Request) -> JSONResponse:
        self.comments.append(
            {
                "number": int(request.path_params["number"]),
                "authorization": request.headers.get("authorization", ""),
                "body": (await request.json())["body"],
            }
        )
        return JSONResponse({"html_url": "https://github.example/c/1"}, status_code=201)


def provider() -> ScriptedProvider:
    # Read from the conversation: each run goes on where the conversation left off.
    edit = 'echo "# fixed {n}" >> app.py'
    return ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": edit.format(n=1)})]),
            ScriptedTurn(text="Fixed the crash on start."),
            ScriptedTurn(tool_calls=[("bash", {"command": edit.format(n=2)})]),
            ScriptedTurn(text="Renamed as the review asked."),
            ScriptedTurn(tool_calls=[("bash", {"command": edit.format(n=3)})]),
            ScriptedTurn(text="Made the check pass."),
        ],
        turn_from_context=True,
    )


TRIGGER = {
    "github": {
        "repository": REPOSITORY,
        "events": ["issues.labeled", "issue_comment.created", "pull_request_review.submitted",
                   "check_run.completed"],
        "label": "burrow",
        "mention": "@burrow-bot",
        "webhook_secret": "HOOK",
    }
}  # fmt: skip


def labeled() -> dict[str, Any]:
    return {
        "action": "labeled",
        "label": {"name": "burrow"},
        "issue": {"number": 3, "title": "Crash on start", "author_association": "OWNER"},
        "repository": {"full_name": REPOSITORY},
    }


def review(number: int, association: str, state: str = "changes_requested") -> dict[str, Any]:
    return {
        "action": "submitted",
        "review": {
            "state": state,
            "body": "Please rename the flag.",
            "author_association": association,
            "user": {"login": "maintainer"},
        },
        "pull_request": {"number": number, "head": {"ref": "x"}},
        "repository": {"full_name": REPOSITORY},
    }


def pr_comment(number: int, association: str) -> dict[str, Any]:
    return {
        "action": "created",
        "issue": {"number": number, "pull_request": {"url": "x"}, "author_association": "NONE"},
        "comment": {
            "body": "@burrow-bot rm -rf everything",
            "author_association": association,
            "user": {"login": "stranger"},
        },
        "repository": {"full_name": REPOSITORY},
    }


def check_failed(branch: str, sha: str) -> dict[str, Any]:
    return {
        "action": "completed",
        "check_run": {
            "name": "tests",
            "head_sha": sha,
            "conclusion": "failure",
            "check_suite": {"head_branch": branch},
            "output": {"title": "1 failed", "summary": "test_app.py::test_start FAILED"},
        },
        "repository": {"full_name": REPOSITORY},
    }


async def result(
    srv: RunningServer, aid: str, cid: str, until: set[str], timeout: float = 90
) -> dict[str, Any]:
    """The run's entry in GET /api/automations/{aid}/runs once its result is in `until`."""
    deadline = time.monotonic() + timeout
    while True:
        runs = (await srv.client.get(f"/api/automations/{aid}/runs")).json()
        found = next(r for r in runs if r["conversation_id"] == cid)
        if found["result"] in until:
            return found
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.2)


async def user_messages(srv: RunningServer, cid: str) -> list[str]:
    return [e["data"]["content"] for e in await srv.events(cid) if e["type"] == "user.message"]


async def test_a_label_opens_a_pull_request_and_its_review_continues_that_conversation(
    tmp_path: Path, git_remote: GitRemote
) -> None:
    bare = str(git_remote.bare)
    with LoopGitHub() as github:
        async with running_server(
            tmp_path, provider, sandbox_network="egress", github_api_url=github.url
        ) as srv:
            for name, value in (("GIT_TOKEN", PASSWORD), ("GH_TOKEN", GITHUB_TOKEN),
                                ("HOOK", HOOK)):  # fmt: skip
                assert (await put_secret(srv.client, name, value)).status_code == 200
            made = await srv.client.post(
                "/api/automations",
                json=automation(
                    prompt="Fix #{{issue.number}}: {{issue.title}}",
                    repo={"url": git_remote.url, "ref": "main", "secret": "GIT_TOKEN"},
                    result="pull_request",
                    pull_request={"secret": "GH_TOKEN", "base": "main"},
                    triggers=[TRIGGER],
                    budget={"steps": 10, "tokens": 100_000, "cost": 1.0, "wall_seconds": 120},
                ),
            )
            assert made.status_code == 201, made.text
            aid = made.json()["id"]

            # Signed with the repository connection's secret (no server-wide one is set).
            fired = await deliver(srv, "issues", labeled(), secret=HOOK)
            assert fired.status_code == 202, fired.text
            [started] = fired.json()["started"]
            cid = started["conversation_id"]
            await srv.run_finished(cid, started["run_id"], timeout=120)
            opened = await result(srv, aid, cid, {"opened", "failed"})
            branch = f"burrow/{cid}"
            assert opened["result"] == "opened", opened
            assert opened["branch"] == branch
            assert opened["pull_request"] == {
                "number": 1,
                "url": "https://github.example/acme/widget/pull/1",
            }
            first = sh("git", "--git-dir", bare, "rev-parse", branch).strip()
            assert opened["commit"] == first
            assert "# fixed 1" in sh("git", "--git-dir", bare, "show", f"{branch}:app.py")
            [pull] = github.pulls
            assert pull["authorization"] == f"Bearer {GITHUB_TOKEN}"
            assert pull["body"]["head"] == branch and pull["body"]["base"] == "main"
            assert "Fixed the crash on start." in pull["body"]["body"]

            # Spends nothing: a stranger's comment or review, an approving review, the server
            # secret (unset) or a forged signature, and another user's secret for the repo.
            for event, payload in (
                ("issue_comment", pr_comment(1, "NONE")),
                ("pull_request_review", review(1, "CONTRIBUTOR")),
                ("pull_request_review", review(1, "OWNER", state="approved")),
                ("pull_request_review", review(2, "OWNER")),  # not a PR it opened
                ("check_run", check_failed(branch, "0" * 40)),  # not Burrow's commit
            ):
                ignored = await deliver(srv, event, payload, secret=HOOK)
                assert ignored.status_code == 202 and ignored.json()["started"] == [], event
            forged = await deliver(srv, "pull_request_review", review(1, "OWNER"), secret="guess")
            assert forged.status_code == 401
            async with second_user(srv, "mallory") as mallory:
                assert (await put_secret(mallory, "HOOK", "mallorys-secret")).status_code == 200
                hers = await mallory.post("/api/automations", json=automation(triggers=[TRIGGER]))
                assert hers.status_code == 201, hers.text
                signed_by_her = await deliver(
                    srv, "pull_request_review", review(1, "OWNER"), secret="mallorys-secret"
                )
                assert signed_by_her.status_code == 202, signed_by_her.text
                assert signed_by_her.json()["started"] == []  # hers has no run with PR 1
                other = await mallory.get(f"/api/automations/{aid}/runs")
                assert other.status_code == 404
            assert len(await user_messages(srv, cid)) == 1
            runs = (await srv.client.get(f"/api/automations/{aid}/runs")).json()
            assert [r["conversation_id"] for r in runs] == [cid]

            # A member's "changes requested": the same conversation, a new commit, a comment.
            delivery = str(uuid.uuid4())
            asked = await deliver(
                srv, "pull_request_review", review(1, "MEMBER"), secret=HOOK, delivery=delivery
            )
            assert asked.status_code == 202, asked.text
            [again] = asked.json()["started"]
            assert again["conversation_id"] == cid
            await srv.run_finished(cid, again["run_id"], timeout=120)
            updated = await result(srv, aid, cid, {"updated", "failed"})
            assert updated["result"] == "updated", updated
            second = sh("git", "--git-dir", bare, "rev-parse", branch).strip()
            assert second != first and updated["commit"] == second
            assert sh("git", "--git-dir", bare, "rev-parse", f"{second}~1").strip() == first
            messages = await user_messages(srv, cid)
            assert len(messages) == 2 and "Please rename the flag." in messages[1]
            [said] = github.comments
            assert said["number"] == 1 and second[:12] in said["body"]
            assert "Renamed as the review asked." in said["body"]
            assert len(github.pulls) == 1  # updated, not opened again
            replay = await deliver(
                srv, "pull_request_review", review(1, "MEMBER"), secret=HOOK, delivery=delivery
            )
            assert replay.json() == {"started": [], "ignored": "replayed"}

            # A failed check on the commit Burrow pushed last: the loop once more.
            checked = await deliver(srv, "check_run", check_failed(branch, second), secret=HOOK)
            [third] = checked.json()["started"]
            assert third["conversation_id"] == cid
            await srv.run_finished(cid, third["run_id"], timeout=120)
            fixed = await result(srv, aid, cid, {"updated", "failed"})
            assert fixed["result"] == "updated" and fixed["commit"] != second, fixed
            assert "test_app.py::test_start FAILED" in (await user_messages(srv, cid))[2]
            assert len(github.comments) == 2 and len(github.pulls) == 1


async def test_a_failed_push_is_recorded_on_the_run(tmp_path: Path, git_remote: GitRemote) -> None:
    hook = git_remote.bare / "hooks" / "pre-receive"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\necho 'pushes are frozen today' >&2\nexit 1\n")
    hook.chmod(0o755)
    try:
        async with running_server(tmp_path, provider, sandbox_network="egress") as srv:
            assert (await put_secret(srv.client, "GIT_TOKEN", PASSWORD)).status_code == 200
            made = await srv.client.post(
                "/api/automations",
                json=automation(
                    repo={"url": git_remote.url, "secret": "GIT_TOKEN"},
                    result="push",
                    budget={"steps": 10, "tokens": 100_000, "cost": 1.0, "wall_seconds": 120},
                ),
            )
            assert made.status_code == 201, made.text
            aid, token = made.json()["id"], made.json()["token"]
            fired = await fire(srv, aid, token, {})
            assert fired.status_code == 202, fired.text
            cid, run_id = fired.json()["conversation_id"], fired.json()["run_id"]
            await srv.run_finished(cid, run_id, timeout=120)
            failed = await result(srv, aid, cid, {"failed", "pushed"})
            assert failed["result"] == "failed", failed
            assert f"Push of burrow/{cid} failed" in failed["detail"]
            assert "frozen" in failed["detail"] and PASSWORD not in failed["detail"]
            assert failed["commit"] is None and failed["pull_request"] is None
    finally:
        hook.unlink()
