"""What an automation does with a run's result once the run ends (`result`):

- `none`: nothing; the run is recorded `none`.
- `push`: the working tree committed to the run's branch (`burrow/<conversation id>`) and
  pushed to the repository's `origin` with the repository's secret, the same two-sandbox
  push as the Changes tab's (burrow/runs/workspace/git/push.py); recorded `pushed`.
- `pull_request`: pushed as above, then a pull request of that branch opened on GitHub
  (`opened`) with the run's last answer as its body, or, when the run's branch already has
  one (a follow-up of the pull-request loop, or one opened by hand), a comment on it
  saying what changed (`updated`).

A run that did not complete (failed, stopped, over budget) pushes nothing (`skipped`), and
every failure is recorded on the run in words (`failed`, `result_detail`), masked with the
owner's secrets, for `GET /api/automations/{id}/runs`. The push goes only to the
automation's own repository: a workspace whose `origin` the agent pointed elsewhere is
refused before any credential is used, and the pull request is opened on the repository
named by the automation's URL, not by what the workspace says."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from burrow.runs.workspace.git.github import (
    GitHubError,
    PullRequestAsk,
    comment,
    open_pull_of,
    open_pull_request,
)
from burrow.runs.workspace.git.push import Author, GitFailed, commit_and_push, remote_of
from burrow.runs.workspace.git.remote import GitRefused, check_url, github_repository
from burrow.store.automations import Automation, AutomationRun, AutomationStore

if TYPE_CHECKING:
    from burrow.config import Settings
    from burrow.runs.conversations.secrets import ConversationSecrets
    from burrow.runs.conversations.service import Conversations

log = logging.getLogger(__name__)

MAX_SUMMARY = 4000  # characters of the run's last answer in a pull request's body or comment


def branch_of(cid: str) -> str:
    return f"burrow/{cid}"


class Results:
    def __init__(
        self,
        conversations: Conversations,
        secrets: ConversationSecrets,
        settings: Settings,
        store: AutomationStore,
    ) -> None:
        self._conversations = conversations
        self._secrets = secrets
        self._settings = settings
        self._store = store

    async def finish(self, automation: Automation, cid: str) -> None:
        """Act on the run that just ended in `cid`; never raises (it is recorded)."""
        try:
            await self._finish(automation, cid)
        except Exception as exc:  # a sandbox gone, the database away: said, not lost
            log.warning("automation %s: the result of %s failed", automation.id, cid, exc_info=True)
            await self._failed(cid, f"The result could not be made: {exc}")

    async def _failed(self, cid: str, detail: str) -> None:
        masked = (await self._secrets.mask_for(cid)).text(detail)
        await self._store.set_result(cid, "failed", detail=masked[:2000])

    async def _finish(self, automation: Automation, cid: str) -> None:
        record = await self._store.run_of(cid)
        if record is None:  # not an automation's run (or deleted meanwhile)
            return
        if automation.result == "none":
            await self._store.set_result(cid, "none")
            return
        status, answer = await self._last_run(cid)
        if status != "completed":
            await self._store.set_result(
                cid, "skipped", detail=f"The run ended {status}: nothing was pushed."
            )
            return
        await self._push(automation, cid, record, answer)

    async def _last_run(self, cid: str) -> tuple[str, str]:
        """The last run's status and its last answer's text."""
        status, answer = "unknown", ""
        for event in await self._conversations.events(cid):
            if event.type == "run.started":
                status, answer = "running", ""
            elif event.type == "assistant.message" and event.data.get("content"):
                answer = str(event.data["content"])
            elif event.type == "run.finished":
                status = str(event.data.get("status"))
        return status, answer

    async def _push(
        self, automation: Automation, cid: str, record: AutomationRun, answer: str
    ) -> None:
        repo = automation.repo
        assert repo is not None  # result push and pull_request need one (checked on save)
        conversation = await self._conversations.get(cid)
        if conversation is None:
            return
        credential = None
        if repo.get("secret"):
            credential = await self._secrets.value(automation.owner_id, repo["secret"])
            if credential is None:
                await self._failed(cid, f"The repository's secret {repo['secret']} is gone.")
                return
        workspace = self._conversations.workspace
        sandbox = await workspace.sandbox(cid)
        try:
            wanted = check_url(repo["url"])
            origin = await remote_of(sandbox, "origin")
        except (GitFailed, GitRefused) as exc:
            await self._failed(cid, f"Push failed ({exc.code}): {exc.message}")
            return
        if origin.url != wanted.url:
            await self._failed(
                cid,
                f"Push refused: the workspace's origin is {origin.url}, not the automation's "
                f"repository {wanted.url}.",
            )
            return
        branch = record.branch or branch_of(cid)
        settings = self._settings
        try:
            pushed = await commit_and_push(
                sandbox,
                maker=workspace.backend,
                network=await workspace.network_of(cid),
                max_bytes=int(settings.git_push_max_mb * 2**20),
                branch=branch,
                remote_name="origin",
                message=f"{conversation.title}\n\nMade with Burrow (conversation {cid}).",
                author=Author(settings.git_author_name, settings.git_author_email),
                credential=credential,
            )
        except GitFailed as exc:
            await self._failed(cid, f"Push of {branch} failed ({exc.code}): {exc.message}")
            return
        try:
            owner, name = github_repository(wanted)
            repository = f"{owner}/{name}".lower()
        except GitRefused:
            owner = name = repository = ""
        await self._store.set_result(
            cid, "pushed", detail=None, branch=branch, commit=pushed.commit,
            repository=repository or None,
        )  # fmt: skip
        if automation.result != "pull_request":
            return
        if not repository:
            await self._failed(cid, f"{wanted.url} does not name a GitHub repository.")
            return
        await self._pull_request(
            automation, cid, record, (owner, name), branch, pushed.commit, answer
        )

    async def _pull_request(
        self,
        automation: Automation,
        cid: str,
        record: AutomationRun,
        where: tuple[str, str],
        branch: str,
        commit: str,
        answer: str,
    ) -> None:
        owner, name = where
        options = automation.pull_request or {}
        secret = options.get("secret") or (automation.repo or {}).get("secret")
        token = await self._secrets.value(automation.owner_id, secret) if secret else None
        if token is None:
            await self._failed(
                cid,
                f"Pushed {branch}, but no pull request: the GitHub token secret "
                f"{secret or '(none named)'} is not set.",
            )
            return
        api = self._settings.github_api_url
        summary = answer.strip()[:MAX_SUMMARY] or "(the run gave no summary)"
        try:
            number, url = record.pull_number, record.pull_url
            if number is None:
                found = await open_pull_of(api, token, owner, name, branch)
                if found is not None:
                    number, url = found.number, found.url
            if number is None:
                conversation = await self._conversations.get(cid)
                base = options.get("base") or (automation.repo or {}).get("ref") or "main"
                ask = PullRequestAsk(
                    owner,
                    name,
                    (conversation.title if conversation else automation.name)[:200],
                    branch,
                    base,
                    f"{summary}\n\nMade with Burrow by the automation {automation.name!r} "
                    f"(conversation {cid}).",
                )
                opened = await open_pull_request(api, token, ask)
                await self._store.set_result(
                    cid, "opened", pull_number=opened.number, pull_url=opened.url
                )
                return
            await comment(
                api, token, owner, name, number, f"Pushed {commit[:12]} to `{branch}`.\n\n{summary}"
            )
            await self._store.set_result(cid, "updated", pull_number=number, pull_url=url)
        except GitHubError as exc:
            await self._failed(cid, f"Pushed {branch}, but GitHub refused: {exc.message}")
