"""The repository an automation's conversation starts from, as a clone source: its URL and
ref checked as a person's would be, and its secret read from the owner's secrets (never
another user's: the owner is the automation's)."""

from __future__ import annotations

from typing import Protocol

from burrow.runs.workspace.git.remote import check_ref, check_url
from burrow.runs.workspace.git.repo_import import RepoSource
from burrow.store.automations import Automation


class SecretValues(Protocol):
    async def value(self, owner_id: str, name: str) -> str | None: ...


class MissingSecret(LookupError):
    pass


async def repo_source(secrets: SecretValues, automation: Automation) -> RepoSource | None:
    """Raises GitRefused for a URL or ref no longer acceptable, MissingSecret for a secret
    its owner has deleted since."""
    repo = automation.repo
    if repo is None:
        return None
    ref = check_ref(repo["ref"]) if repo.get("ref") else None
    name = repo.get("secret")
    password = None
    if name is not None:
        password = await secrets.value(automation.owner_id, name)
        if password is None:
            raise MissingSecret(f"{automation.owner_id} has no secret {name}")
    return RepoSource(check_url(repo["url"]), ref, password)
