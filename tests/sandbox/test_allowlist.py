"""BURROW_SANDBOX_ALLOW_DOMAINS: exact names, `*.` wildcards, and nothing else."""

from __future__ import annotations

import pytest

from burrow.sandbox.allowlist import DomainAllowlist


def test_exact_names_and_wildcards() -> None:
    allow = DomainAllowlist.parse(" Registry.npmjs.org , *.GitHub.com,,")
    assert allow.allows("registry.npmjs.org") and allow.allows("REGISTRY.NPMJS.ORG.")
    assert allow.allows("api.github.com") and allow.allows("a.b.github.com")
    assert not allow.allows("github.com")  # the wildcard is for names under it
    assert not allow.allows("evilgithub.com") and not allow.allows("github.com.evil.net")
    assert not allow.allows("npmjs.org") and not allow.allows("registry.npmjs.org.evil.net")
    assert allow.entries() == ["registry.npmjs.org", "*.github.com"]


def test_empty_means_no_allowlist() -> None:
    assert not DomainAllowlist.parse("")
    assert not DomainAllowlist.parse(" , ")


@pytest.mark.parametrize(
    "entry", ["*", "*.com.*", "http://example.com", "exa mple.com", "a/b", "x" * 300, "-a.com"]
)
def test_a_malformed_entry_names_the_setting(entry: str) -> None:
    with pytest.raises(ValueError, match="BURROW_SANDBOX_ALLOW_DOMAINS"):
        DomainAllowlist.parse(f"example.com,{entry}")
