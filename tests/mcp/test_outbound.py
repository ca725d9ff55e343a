"""The URL policy for HTTP MCP servers: public addresses only, unless listed exactly."""

from __future__ import annotations

import pytest

from burrow.tools.mcp.outbound import UrlPolicy, UrlRefused


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fd00::5",
        "::ffff:127.0.0.1",
        "224.0.0.1",
    ],
)
def test_addresses_off_the_public_internet_are_refused(address: str) -> None:
    with pytest.raises(UrlRefused, match="not a public address"):
        UrlPolicy().check_address("https://mcp.example.com/mcp", address)


def test_public_addresses_pass_and_a_listed_url_may_be_private() -> None:
    UrlPolicy().check_address("https://mcp.example.com/mcp", "93.184.216.34")
    policy = UrlPolicy(["http://127.0.0.1:9000/mcp"])
    policy.check_address("http://127.0.0.1:9000/mcp", "127.0.0.1")
    policy.check_address("http://127.0.0.1:9000/mcp/sub?x=1", "127.0.0.1")
    for url in (
        "http://127.0.0.1:90001/mcp",
        "http://127.0.0.1:9000/mcpx",
        "http://localhost:9000/mcp",
    ):
        with pytest.raises(UrlRefused):
            policy.check_address(url, "127.0.0.1")


def test_burrows_own_port_and_other_schemes_are_refused_before_resolving() -> None:
    policy = UrlPolicy(own_ports={8420})
    with pytest.raises(UrlRefused, match="own port 8420"):
        policy.check_url("http://mcp.example.com:8420/mcp")
    for url in ("file:///etc/passwd", "gopher://x", "http:///nohost"):
        with pytest.raises(UrlRefused, match="not an http"):
            policy.check_url(url)
    policy.check_url("https://mcp.example.com/mcp")
    UrlPolicy(["http://127.0.0.1:8420/"], own_ports={8420}).check_url("http://127.0.0.1:8420/x")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9000/mcp/../admin",
        "http://127.0.0.1:9000/mcp/./../admin",
        "http://127.0.0.1:9000/mcp/%2e%2e/admin",
        "http://127.0.0.1:9000/mcp/%2E%2e/admin",
        "http://127.0.0.1:9000/mcp/.%2e/admin",
        "http://127.0.0.1:9000/mcp/%252e%252e/admin",
        "http://127.0.0.1:9000/mcp/..%2fadmin",
        "http://127.0.0.1:9000/mcp/..",
        "http://127.0.0.1:9000/mcp/..\\admin",
    ],
)
def test_dot_segments_after_a_listed_prefix_are_refused(url: str) -> None:
    policy = UrlPolicy(["http://127.0.0.1:9000/mcp/"])
    assert not policy.explicitly_allowed(url)
    with pytest.raises(UrlRefused, match=r"'\.\.' segment"):
        policy.check_url(url)
    with pytest.raises(UrlRefused, match="not a public address"):
        policy.check_address(url, "127.0.0.1")


def test_dots_inside_a_segment_or_the_query_are_ordinary() -> None:
    policy = UrlPolicy(["http://127.0.0.1:9000/mcp/"])
    for url in (
        "http://127.0.0.1:9000/mcp/v1..2/x",
        "http://127.0.0.1:9000/mcp/.well-known/x",
        "http://127.0.0.1:9000/mcp/x?next=../admin",
        "http://127.0.0.1:9000/mcp/a%20b",
    ):
        assert policy.explicitly_allowed(url), url
        policy.check_url(url)
