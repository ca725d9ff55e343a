"""`BURROW_SANDBOX` picks a backend by name from one table; each declares its capabilities."""

from __future__ import annotations

from pathlib import Path

import pytest

from burrow.backends import BACKENDS, make_backend
from burrow.config import Settings
from burrow.sandbox.e2b import E2BBackend
from burrow.sandbox.local import LocalBackend


def settings(tmp_path: Path, **values: object) -> Settings:
    return Settings(data_dir=tmp_path, **values)  # type: ignore[arg-type]


def test_each_name_builds_its_backend_with_declared_capabilities(tmp_path: Path) -> None:
    local = make_backend(settings(tmp_path, sandbox="local"))
    assert isinstance(local, LocalBackend) and local.name == "local"
    assert local.capabilities.preview == "tunnel" and local.capabilities.hibernation == "files"
    remote = make_backend(settings(tmp_path, sandbox="e2b", e2b_hibernation="files"))
    assert isinstance(remote, E2BBackend) and remote.name == "e2b"
    assert remote.capabilities.preview == "http"
    assert remote.capabilities.hibernation == "files"
    assert not remote.capabilities.egress_allowlist
    assert make_backend(settings(tmp_path, sandbox="e2b")).capabilities.hibernation == "memory"
    assert sorted(BACKENDS) == ["e2b", "local"]


def test_an_unknown_name_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"Unknown sandbox backend 'docker': BURROW_SANDBOX=local\|e2b"
    ):
        make_backend(settings(tmp_path, sandbox="docker"))


def test_an_allowlist_the_e2b_backend_cannot_enforce_is_refused(tmp_path: Path) -> None:
    """Silently ignoring BURROW_SANDBOX_ALLOW_DOMAINS would let secrets leave anywhere."""
    with pytest.raises(ValueError, match="not enforced by the e2b backend"):
        make_backend(settings(tmp_path, sandbox="e2b", sandbox_allow_domains="pypi.org"))
