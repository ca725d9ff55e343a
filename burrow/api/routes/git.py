"""A repository in (`repo` of a new conversation) and out (push a branch, open a pull request).

Git runs in sandboxes, so it needs the sandbox's egress: a clone in the conversation's, a
push's commit there too and its credentialed `git push` in a fresh sandbox of its own
(`runs/workspace/git/push_sandbox.py`); the GitHub API call is the server's own. A secret named here
is looked up among the caller's secrets and given to that one git process or API call only.
"""

from __future__ import annotations

from fastapi import APIRouter

from burrow.api.checks import git_refused, require_egress, secret_value
from burrow.api.deps import ConversationDep, ServicesDep
from burrow.api.errors import ApiError
from burrow.api.schemas import GitPush, GitPushed, PullRequestIn, PullRequestOut
from burrow.runs.workspace.git.github import GitHubError, PullRequestAsk, open_pull_request
from burrow.runs.workspace.git.push import Author, GitFailed, commit_and_push, remote_of
from burrow.runs.workspace.git.remote import (
    GitRefused,
    check_ref,
    check_remote_name,
    github_repository,
)
from burrow.services import Services
from burrow.store.records import Conversation

router = APIRouter(prefix="/api/conversations", tags=["git"])

FAILURE_STATUS = {"push_failed": 502}  # the remote's fault or the network's; the rest: 409


async def require_idle(svc: Services, cid: str) -> None:
    if await svc.conversations.busy(cid):
        raise ApiError(
            409,
            "run_active",
            "A run is going in this conversation and may be changing files: push once it "
            "ends, or stop it first.",
        )
    if svc.conversations.workspace.importing(cid):
        raise ApiError(
            409,
            "import_running",
            "The repository is still being cloned, or its .burrow/setup.sh is running: "
            "push once that has ended.",
        )


@router.post("/{cid}/git/push")
async def push(body: GitPush, conversation: ConversationDep, svc: ServicesDep) -> GitPushed:
    """Commit the working tree to `branch` (made if needed) and push it to `remote`."""
    try:
        check_ref(body.branch, "branch")
        check_remote_name(body.remote)
    except GitRefused as exc:
        raise git_refused(exc) from exc
    await require_idle(svc, conversation.id)
    require_egress(svc, conversation, "Pushing")
    credential = await secret_value(svc, conversation.owner_id, body.secret)
    workspace = svc.conversations.workspace
    sandbox = await workspace.sandbox(conversation.id)
    settings = svc.settings
    try:
        pushed = await commit_and_push(
            sandbox,
            maker=workspace.backend,
            network=await workspace.network_of(conversation.id),
            max_bytes=int(settings.git_push_max_mb * 2**20),
            branch=body.branch,
            remote_name=body.remote,
            message=body.message or default_message(conversation),
            author=Author(settings.git_author_name, settings.git_author_email),
            credential=credential,
        )
    except GitFailed as exc:
        # The remote's words may echo any of the owner's secrets, not just the one used.
        message = (await svc.secrets.mask_for(conversation.id)).text(exc.message)
        raise ApiError(FAILURE_STATUS.get(exc.code, 409), exc.code, message) from exc
    return GitPushed(
        branch=pushed.branch,
        remote=pushed.remote,
        url=pushed.url,
        commit=pushed.commit,
        committed=pushed.committed,
    )


def default_message(conversation: Conversation) -> str:
    return f"{conversation.title}\n\nMade with Burrow (conversation {conversation.id})."


@router.post("/{cid}/git/pull-request", status_code=201)
async def pull_request(
    body: PullRequestIn, conversation: ConversationDep, svc: ServicesDep
) -> PullRequestOut:
    """Open a pull request of `head` into `base` on the GitHub repository of `origin`."""
    owner_prefix, _, head_branch = body.head.rpartition(":")  # "owner:branch" for a fork
    try:
        check_ref(body.base, "base")
        check_ref(head_branch, "head")
        if owner_prefix:
            check_remote_name(owner_prefix)
    except GitRefused as exc:
        raise git_refused(exc) from exc
    token = await secret_value(svc, conversation.owner_id, body.secret)
    assert token is not None  # `secret` is required
    sandbox = await svc.conversations.workspace.sandbox(conversation.id)
    try:
        owner, repo = github_repository(await remote_of(sandbox, "origin"))
    except GitFailed as exc:
        raise ApiError(409, exc.code, exc.message) from exc
    except GitRefused as exc:
        raise ApiError(409, exc.code, exc.message) from exc
    ask = PullRequestAsk(owner, repo, body.title, body.head, body.base, body.body or "")
    try:
        opened = await open_pull_request(svc.settings.github_api_url, token, ask)
    except GitHubError as exc:
        message = (await svc.secrets.mask_for(conversation.id)).text(exc.message)
        raise ApiError(502, "github_error", message) from exc
    return PullRequestOut(number=opened.number, url=opened.url)
