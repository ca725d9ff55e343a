"""Taking the workspace out: commit it to a branch and push that branch, in two sandboxes.

In the conversation's sandbox, with no credential anywhere, the working tree is committed
to the branch (Burrow's own `.burrow/outputs` and `.burrow/services` left out) and the
branch written as a git bundle; the bundle is read out through the sandbox API (at most
BURROW_GIT_PUSH_MAX_MB) and pushed from a fresh sandbox of its own (`push_sandbox`), the
only place the credential ever is. The remote's URL is read from the repository as
configured (not through `url.*.insteadOf`), checked like a clone's, and pushed to by URL
with the credential scoped to its host (see `git_remote`); a remote pointing at a local
path is refused. The remote's URL itself is the repository's, which the agent can change:
the answer names the URL pushed to.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass

from burrow.runs.workspace import between_sandboxes
from burrow.runs.workspace.between_sandboxes import TooLarge, copy_file
from burrow.runs.workspace.git import push_sandbox
from burrow.runs.workspace.git.in_sandbox import GitResult, run_git
from burrow.runs.workspace.git.push_sandbox import SandboxMaker
from burrow.runs.workspace.git.remote import (
    GitRefused,
    Remote,
    check_ref,
    check_remote_name,
    check_url,
    git_options,
)
from burrow.sandbox.backend import NetworkPolicy, Sandbox, SandboxError
from burrow.sandbox.masking import SecretMask

BUNDLES = ".burrow/outputs"  # Burrow's own folder: never committed, checkpointed or listed

# $1 branch, $2 the bundle to write, $3 message, $4 author name, $5 author email, then
# git's -c options. Exit codes name the step that failed: 21 switching branch, 22
# committing, 23 writing the bundle.
COMMIT_AND_BUNDLE = r"""
set -u
branch=$1; bundle=$2; message=$3; name=$4; email=$5; shift 5
export GIT_AUTHOR_NAME=$name GIT_AUTHOR_EMAIL=$email
export GIT_COMMITTER_NAME=$name GIT_COMMITTER_EMAIL=$email
current=$(git symbolic-ref -q --short HEAD || true)
if [ "$current" != "$branch" ]; then
  if git show-ref -q --verify "refs/heads/$branch"; then
    git "$@" switch -q "$branch" || exit 21
  else
    git "$@" switch -q -c "$branch" || exit 21
  fi
fi
git "$@" add -A -- . ':(exclude).burrow/outputs' ':(exclude).burrow/services' || exit 22
if ! git diff --cached --quiet; then
  git "$@" commit -q --no-verify -m "$message" || exit 22
  echo committed >&2
fi
git rev-parse -q --verify HEAD >/dev/null || { echo "nothing to push: no commit" >&2; exit 22; }
mkdir -p "${bundle%/*}" && git "$@" bundle create -q "$bundle" "refs/heads/$branch" || exit 23
"""


class GitFailed(Exception):
    """A git step failed; `code` says which (no_repository, no_remote, checkout_failed,
    commit_failed, bundle_failed, push_too_large, push_rejected, push_failed), `message`
    is git's own, masked."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Author:
    name: str
    email: str


@dataclass(frozen=True)
class Pushed:
    branch: str
    remote: str
    url: str
    commit: str
    committed: bool  # a new commit was made (false: the working tree had no change)


# $1 the remote's name. Its URL as configured: `git remote get-url` would apply the
# repository's `url.*.insteadOf` first, and the credential would follow the rewrite.
REMOTE_URL = r"""
git rev-parse --git-dir >/dev/null 2>&1 || exit 3
git config --get "remote.$1.url" || exit 4
"""


async def remote_of(sandbox: Sandbox, name: str) -> Remote:
    """The checked URL of the workspace repository's remote `name`."""
    check_remote_name(name)
    found = await run_git(sandbox, ["bash", "-c", REMOTE_URL, "burrow-remote", name])
    if found.exit_code == 3:
        raise GitFailed("no_repository", "The workspace is not a git repository.")
    if not found.ok:
        raise GitFailed("no_remote", f"The repository has no remote named {name}.")
    try:
        return check_url(found.stdout.strip())
    except GitRefused as exc:
        raise GitFailed(
            "no_remote", f"The remote {name} cannot be pushed to: {exc.message}"
        ) from exc


async def commit_and_push(
    sandbox: Sandbox,
    *,
    maker: SandboxMaker,
    network: NetworkPolicy | None,
    branch: str,
    remote_name: str,
    message: str,
    author: Author,
    credential: str | None,
    max_bytes: int,
) -> Pushed:
    """Commit in `sandbox`, push from a fresh sandbox `maker` makes with `network`; the
    branch's bundle may have at most `max_bytes`."""
    check_ref(branch, "branch")
    remote = await remote_of(sandbox, remote_name)
    mask = SecretMask([credential] if credential else [])
    bundle = f"{BUNDLES}/push-{secrets.token_hex(8)}.bundle"
    try:
        committed = await _commit_and_bundle(sandbox, branch, bundle, message, author)
        size = (await sandbox.stat(bundle)).size
        if size > max_bytes:  # said before a sandbox is made for it
            raise _too_large(TooLarge(size, max_bytes))
        async with push_sandbox.push_sandbox(maker, sandbox.id, network) as clean:
            await _copy_bundle(sandbox, bundle, clean, max_bytes)
            fetched = await push_sandbox.fetch_bundle(clean, branch)
            if not fetched.ok:
                raise GitFailed("bundle_failed", mask.text(fetched.message()))
            result = await push_sandbox.push(clean, remote, branch, credential)
    finally:
        path = f"{sandbox.workspace}/{bundle}"
        with contextlib.suppress(SandboxError):  # stopped: it stays in .burrow/outputs, unused
            await between_sandboxes.run_in(sandbox, 'rm -f "$1"', path, what="Removing it")
    if not result.ok:
        raise _failure(result, mask)
    return Pushed(
        branch=branch,
        remote=remote_name,
        url=remote.url,
        commit=fetched.stdout.strip(),
        committed=committed,
    )


async def _commit_and_bundle(
    sandbox: Sandbox, branch: str, bundle: str, message: str, author: Author
) -> bool:
    """Whether a new commit was made; the branch is then in the bundle at `bundle`."""
    path = f"{sandbox.workspace}/{bundle}"
    argv = ["bash", "-c", COMMIT_AND_BUNDLE, "burrow-commit", branch, path, message]
    argv += [author.name, author.email, *git_options(None, with_credential=False)]
    result = await run_git(sandbox, argv)
    if not result.ok:
        raise _failure(result, SecretMask([]))
    return "committed" in result.stderr.splitlines()


async def _copy_bundle(origin: Sandbox, bundle: str, target: Sandbox, max_bytes: int) -> None:
    destination = f"{target.workspace}/{push_sandbox.BUNDLE}"
    try:
        await copy_file(
            origin, bundle, target, destination, what="Copying the branch", max_bytes=max_bytes
        )
    except TooLarge as exc:  # it grew since: the sandbox's code rewrote it
        raise _too_large(exc) from None


def _too_large(exc: TooLarge) -> GitFailed:
    return GitFailed(
        "push_too_large",
        f"The branch's history is {exc.size / 2**20:.1f} MB as a git bundle, over the "
        f"{exc.limit / 2**20:g} MB a push copies: push a branch with less history, or ask "
        "the operator to raise BURROW_GIT_PUSH_MAX_MB.",
    )


def _failure(result: GitResult, mask: SecretMask) -> GitFailed:
    message = mask.text(result.message())
    if result.exit_code == 21:
        return GitFailed("checkout_failed", message)
    if result.exit_code == 22:
        return GitFailed("commit_failed", message)
    if result.exit_code == 23:
        return GitFailed("bundle_failed", message)
    # --porcelain marks a ref the remote refused with "!" (non-fast-forward, protected).
    if any(line.startswith("!") for line in result.stdout.splitlines()):
        return GitFailed("push_rejected", mask.text(result.stdout.strip() + "\n" + message))
    return GitFailed("push_failed", message)
