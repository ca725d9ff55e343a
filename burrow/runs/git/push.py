"""Taking the workspace out: commit it to a branch and push that branch, from the sandbox.

The remote's URL is read from the repository as configured, checked like a clone's, and
pushed to by URL with the credential scoped to its host (see `git_remote`): a rewrite the
agent planted in `.git/config` (`url.*.insteadOf`) sends the push elsewhere without the
secret, and a remote pointing at a local path is refused. The remote's URL itself is the
repository's, which the agent can change: the answer names the URL pushed to. Burrow's own
`.burrow/outputs` and `.burrow/services` are left out of the commit.
"""

from __future__ import annotations

from dataclasses import dataclass

from burrow.runs.git.in_sandbox import GitResult, run_git
from burrow.runs.git.remote import (
    CREDENTIAL_ENV,
    GitRefused,
    Remote,
    check_ref,
    check_remote_name,
    check_url,
    git_options,
)
from burrow.sandbox.backend import Sandbox
from burrow.sandbox.masking import SecretMask

# $1 branch, $2 URL, $3 message, $4 author name, $5 author email, then git's -c options.
# Exit codes name the step that failed: 21 switching branch, 22 committing, else the push.
COMMIT_AND_PUSH = r"""
set -u
branch=$1; url=$2; message=$3; name=$4; email=$5; shift 5
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
git "$@" push --porcelain --no-verify -- "$url" "refs/heads/$branch:refs/heads/$branch"
"""


class GitFailed(Exception):
    """A git step failed; `code` says which (no_repository, no_remote, checkout_failed,
    commit_failed, push_rejected, push_failed), `message` is git's own, masked."""

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
    branch: str,
    remote_name: str,
    message: str,
    author: Author,
    credential: str | None,
) -> Pushed:
    check_ref(branch, "branch")
    remote = await remote_of(sandbox, remote_name)
    mask = SecretMask([credential] if credential else [])
    argv = ["bash", "-c", COMMIT_AND_PUSH, "burrow-push", branch, remote.url, message]
    argv += [author.name, author.email, *git_options(remote, with_credential=bool(credential))]
    env = {CREDENTIAL_ENV: credential} if credential else {}
    result = await run_git(sandbox, argv, env)
    if not result.ok:
        raise _failure(result, mask)
    head = await run_git(sandbox, ["git", "rev-parse", "HEAD"])
    return Pushed(
        branch=branch,
        remote=remote_name,
        url=remote.url,
        commit=head.stdout.strip(),
        committed="committed" in result.stderr.splitlines(),
    )


def _failure(result: GitResult, mask: SecretMask) -> GitFailed:
    message = mask.text(result.message())
    if result.exit_code == 21:
        return GitFailed("checkout_failed", message)
    if result.exit_code == 22:
        return GitFailed("commit_failed", message)
    # --porcelain marks a ref the remote refused with "!" (non-fast-forward, protected).
    if any(line.startswith("!") for line in result.stdout.splitlines()):
        return GitFailed("push_rejected", mask.text(result.stdout.strip() + "\n" + message))
    return GitFailed("push_failed", message)
