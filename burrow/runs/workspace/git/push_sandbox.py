"""Where a push holds its credential: a fresh sandbox with a bundle and Burrow's config only.

Nothing the conversation's sandbox can write reaches this git: the sandbox is new (its own
id, `<conversation's sandbox>.push-<random>`, destroyed when the push ends, whatever
happens), it holds the branch's bundle and nothing else from the workspace, and git reads
no configuration file but the one `git init` writes in an empty repository here
(`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`, an empty HOME); the rest is given
with `-c`. So a `http.<url>.proxy`, `sslVerify=false`, `insteadOf`, `include.path` or
helper planted in `.git/config` or the workspace's `.gitconfig` is never read, and no
process of the conversation's can read the credential from `/proc`: it is in one git
process's environment, in a sandbox that ran nothing of the workspace's. The sandbox is
made with the backend directly, not the conversation's pool, so it counts against no cap
that could hibernate or refuse the user's own; a leftover after a crash lives under the
same data directory and is reaped like any other sandbox's.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from typing import Protocol

from burrow.runs.workspace.git.in_sandbox import GitResult, run_git
from burrow.runs.workspace.git.remote import CREDENTIAL_ENV, Remote, git_options
from burrow.sandbox.backend import NetworkPolicy, Sandbox, SandboxError

log = logging.getLogger(__name__)

BUNDLE = "push.bundle"  # the one file from the workspace, at the push sandbox's workspace
REPO = "repo.git"
HOME = "home"  # empty: no ~/.gitconfig, no ~/.config/git
# What git may read besides `-c`: nothing outside the repository `git init` made here.
ISOLATED_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}

# $1 the bundle, $2 the branch, $3 the repository, $4 HOME, then git's -c options. An empty
# repository (no template: no hooks, no info/ files) and the branch fetched from the
# bundle; its commit on stdout.
FETCH_BUNDLE = r"""
set -eu
bundle=$1; branch=$2; repo=$3; home=$4; shift 4
mkdir -p "$home"
git init -q --bare --template= "$repo"
git --git-dir="$repo" "$@" fetch -q --no-tags --no-write-fetch-head -- "$bundle" \
  "refs/heads/$branch:refs/heads/$branch"
git --git-dir="$repo" rev-parse --verify "refs/heads/$branch^{commit}"
"""


class SandboxMaker(Protocol):
    """What makes the push sandbox: a `Backend`'s create and destroy."""

    async def create(self, sandbox_id: str, *, network: NetworkPolicy | None = None) -> Sandbox:
        """A new sandbox for `sandbox_id`, ready."""
        ...

    async def destroy(self, sandbox_id: str) -> None:
        """Gone with its workspace; must not fail for an id that never started."""
        ...


@contextlib.asynccontextmanager
async def push_sandbox(
    maker: SandboxMaker, beside: str, network: NetworkPolicy | None
) -> AsyncIterator[Sandbox]:
    """A fresh sandbox beside `beside` with its network policy, destroyed on leaving (also
    on an error or a cancellation, and when its start failed half way)."""
    sandbox_id = f"{beside}.push-{secrets.token_hex(6)}"
    try:
        yield await maker.create(sandbox_id, network=network)
    finally:
        try:
            await maker.destroy(sandbox_id)
        except SandboxError as exc:  # the push's own outcome stands; the log names the rest
            log.warning("could not destroy push sandbox %s: %s", sandbox_id, exc.message)


def env(sandbox: Sandbox) -> dict[str, str]:
    return {**ISOLATED_ENV, "HOME": f"{sandbox.workspace}/{HOME}"}


async def fetch_bundle(sandbox: Sandbox, branch: str) -> GitResult:
    """The branch from the bundle at `BUNDLE` into `REPO`; stdout is its commit."""
    root = sandbox.workspace
    argv = ["sh", "-c", FETCH_BUNDLE, "burrow-fetch", f"{root}/{BUNDLE}", branch]
    argv += [f"{root}/{REPO}", f"{root}/{HOME}", *git_options(None, with_credential=False)]
    # A bundle is read through git's `file` transport, which git_options turns off.
    return await run_git(sandbox, [*argv, "-c", "protocol.file.allow=always"], env(sandbox))


async def push(sandbox: Sandbox, remote: Remote, branch: str, credential: str | None) -> GitResult:
    """`git push` of the fetched branch; the credential in that one process's environment."""
    ref = f"refs/heads/{branch}:refs/heads/{branch}"
    argv = ["git", f"--git-dir={sandbox.workspace}/{REPO}"]
    argv += git_options(remote, with_credential=bool(credential))
    argv += ["push", "--porcelain", "--no-verify", "--", remote.url, ref]
    secret = {CREDENTIAL_ENV: credential} if credential else {}
    return await run_git(sandbox, argv, {**env(sandbox), **secret})
