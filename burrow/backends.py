"""The sandbox backends by name (`BURROW_SANDBOX`): a new backend is a module under
`burrow/sandbox/` plus one line in `BACKENDS`.

Each entry builds its backend from the settings; the e2b one imports the SDK only when
chosen, as it is an optional extra.
"""

from __future__ import annotations

from typing import Protocol

from burrow.config import Settings
from burrow.sandbox.allowlist import DomainAllowlist
from burrow.sandbox.backend import Backend, RemoteIds
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.local import LocalBackend


def local_backend(
    settings: Settings, *, remote_ids: RemoteIds | None = None, home: str | None = None
) -> LocalBackend:
    """Bubblewrap sandboxes on this machine, as `burrow serve` and `burrow sandbox-host`
    configure them (the BURROW_SANDBOX_* settings). A local sandbox's id is its own name:
    it needs no `remote_ids`. `home`: E2B's layout (the sandbox host's, local.py)."""
    limits = None
    if settings.sandbox_limits:
        limits = Limits(
            memory_mb=settings.sandbox_memory_mb,
            pids=settings.sandbox_pids,
            cpus=settings.sandbox_cpus,
            disk_mb=settings.sandbox_disk_mb,
            tmp_mb=settings.sandbox_tmp_mb,
        )
    return LocalBackend(
        settings.data_dir,
        limits=limits,
        network=settings.sandbox_network,
        allow_domains=DomainAllowlist.parse(settings.sandbox_allow_domains) or None,
        seccomp=settings.sandbox_seccomp,
        root=settings.sandbox_root,
        agent_timeout=settings.sandbox_agent_timeout,
        home=home,
    )


def e2b_backend(settings: Settings, *, remote_ids: RemoteIds | None = None) -> Backend:
    try:
        from burrow.sandbox.e2b import E2BBackend
    except ImportError as exc:
        raise ValueError(
            f"BURROW_SANDBOX=e2b needs the e2b SDK ({exc}): install Burrow with its extra, "
            "`pip install 'burrow[e2b]'`."
        ) from None
    if settings.sandbox_allow_domains:
        raise ValueError(
            "BURROW_SANDBOX_ALLOW_DOMAINS is not enforced by the e2b backend; unset it, or "
            "use the local backend for an egress allowlist."
        )
    return E2BBackend(
        template=settings.e2b_template or None,
        timeout=settings.e2b_timeout,
        network=settings.sandbox_network,
        hibernation=settings.e2b_hibernation,
        workspace=settings.e2b_workspace or None,
        remote_ids=remote_ids,
    )


class BuildBackend(Protocol):
    def __call__(self, settings: Settings, *, remote_ids: RemoteIds | None = None) -> Backend: ...


BACKENDS: dict[str, BuildBackend] = {
    "local": local_backend,
    "e2b": e2b_backend,
}


def make_backend(settings: Settings, *, remote_ids: RemoteIds | None = None) -> Backend:
    """The backend `BURROW_SANDBOX` names; a name not in `BACKENDS` is refused. A remote
    backend keeps which remote sandbox serves each sandbox in `remote_ids` (the database)."""
    build = BACKENDS.get(settings.sandbox)
    if build is None:
        names = "|".join(BACKENDS)
        raise ValueError(f"Unknown sandbox backend {settings.sandbox!r}: BURROW_SANDBOX={names}")
    return build(settings, remote_ids=remote_ids)
