"""Checks at the edge that several routes share: a value no request could mean is a 400
saying what to send, before anything is woken, cloned or created."""

from __future__ import annotations

from burrow.api.errors import ApiError, nul_in_path
from burrow.api.schemas import RepoIn
from burrow.runs.conversations.service import SettingRefused
from burrow.runs.loop.hooks.attachments import MAX_ATTACHMENTS, BadPath, workspace_path
from burrow.runs.workspace.git.remote import GitRefused, check_ref, check_url
from burrow.runs.workspace.git.repo_import import RepoSource
from burrow.services import Services


def checked(path: str) -> str:
    """`path`, refused at the edge when no file could ever have that name.

    Passed on, a NUL byte makes the sandbox's guest reject the whole request frame, which
    the caller would see as the sandbox being unavailable (503).
    """
    if "\0" in path:
        raise nul_in_path()
    return path


def attachment_paths(paths: list[str]) -> list[str]:
    """The workspace paths of a message's attachments, normalised, or a 400."""
    if len(paths) > MAX_ATTACHMENTS:
        raise ApiError(400, "too_many_attachments", f"Attach at most {MAX_ATTACHMENTS} files.")
    try:
        return [workspace_path(p) for p in paths]
    except BadPath as exc:
        raise ApiError(400, "invalid_path", f"Attachment: {exc}") from exc


def setting_refused(exc: SettingRefused) -> ApiError:
    return ApiError(400, exc.code, str(exc))


def checked_model(svc: Services, model: str) -> str:
    """`model` as stored, or a 400 saying why the server cannot use it."""
    try:
        return svc.conversations.checked_model(model)
    except SettingRefused as exc:
        raise setting_refused(exc) from exc


def git_refused(exc: GitRefused) -> ApiError:
    return ApiError(400, exc.code, exc.message)


def network_policy(svc: Services, chosen: object | None) -> str:
    """The network the conversation's sandbox gets: its own choice (`network`, when the
    conversation or request carries one), else the server's default."""
    own = getattr(chosen, "network", None)
    return own if isinstance(own, str) else svc.settings.sandbox_network


def require_egress(svc: Services, chosen: object | None, what: str) -> None:
    if network_policy(svc, chosen) == "none":
        raise ApiError(
            409,
            "network_disabled",
            f"{what} needs the sandbox's network, and its policy is `none`: set "
            "BURROW_SANDBOX_NETWORK=egress (or choose egress for the conversation).",
        )


async def secret_value(svc: Services, owner_id: str, name: str | None) -> str | None:
    if name is None:
        return None
    value = await svc.secrets.value(owner_id, name)
    if value is None:
        raise ApiError(
            400,
            "secret_not_found",
            f"You have no secret named {name[:128]}: set it first (PUT /api/secrets/{{name}}).",
        )
    return value


async def checked_repo(svc: Services, owner_id: str, body: object, repo: RepoIn) -> RepoSource:
    """The repository a new conversation starts from, checked before anything is created."""
    try:
        remote = check_url(repo.url)
        ref = check_ref(repo.ref) if repo.ref else None
    except GitRefused as exc:
        raise git_refused(exc) from exc
    require_egress(svc, body, "Cloning a repository")
    return RepoSource(remote, ref, await secret_value(svc, owner_id, repo.secret))
