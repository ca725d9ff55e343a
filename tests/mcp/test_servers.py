"""mcp.json: parsing, refusing what is malformed, and ${NAME} expansion from secrets only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burrow.tools.mcp import servers
from burrow.tools.mcp.servers import MissingSecret, ServerConfig


def _load(tmp_path: Path, document: object) -> servers.McpConfig:
    (tmp_path / "mcp.json").write_text(json.dumps(document))
    return servers.load(tmp_path)


def test_the_desktop_client_form_is_read(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "server"], "env": {"A": "b"}},
                "local": {"command": "/opt/tool", "host": True},
                "web": {"url": "https://mcp.example.com/mcp", "headers": {"X": "y"}},
            }
        },
    )
    assert not config.problems
    files, local, web = config.servers
    assert (files.transport, files.args, dict(files.env)) == (
        "sandbox",
        ("-y", "server"),
        {"A": "b"},
    )
    assert local.transport == "host"
    assert (web.transport, dict(web.headers)) == ("http", {"X": "y"})


def test_no_file_is_no_servers_and_a_broken_one_is_a_problem(tmp_path: Path) -> None:
    assert servers.load(tmp_path) == servers.McpConfig()
    (tmp_path / "mcp.json").write_text("{not json")
    [(where, what)] = servers.load(tmp_path).problems
    assert where == "mcp.json" and "not valid JSON" in what
    (tmp_path / "mcp.json").write_bytes(b" " * (servers.MAX_FILE_BYTES + 1))
    assert "larger than" in servers.load(tmp_path).problems[0][1]


@pytest.mark.parametrize(
    ("name", "entry", "problem"),
    [
        ("bad name!", {"command": "x"}, "server name"),
        ("a" * 33, {"command": "x"}, "server name"),
        ("both", {"command": "x", "url": "https://a"}, "not both"),
        ("neither", {}, "not both"),
        ("scheme", {"url": "file:///etc/passwd"}, "http://"),
        ("args", {"command": "x", "args": "rm -rf /"}, "list of strings"),
        ("env", {"command": "x", "env": {"A": 1}}, "object of strings"),
        ("host", {"command": "x", "host": "yes"}, "true or false"),
        ("list", ["command"], "an object"),
    ],
)
def test_malformed_entries_are_problems_and_the_rest_still_loads(
    tmp_path: Path, name: str, entry: object, problem: str
) -> None:
    config = _load(tmp_path, {"mcpServers": {name: entry, "ok": {"command": "x"}}})
    assert [s.name for s in config.servers] == ["ok"]
    [(where, what)] = config.problems
    assert where == name and problem in what


def test_placeholders_expand_from_the_given_secrets_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME_TOKEN", "from-the-environment")
    server = ServerConfig(
        "s",
        command="x",
        args=("--token=${TOKEN}",),
        env={"A": "${TOKEN}-${OTHER}", "LITERAL": "$TOKEN"},
    )
    assert server.placeholders() == ["OTHER", "TOKEN"]
    expanded = server.expanded({"TOKEN": "t0k3n", "OTHER": "o"})
    assert expanded.args == ("--token=t0k3n",)
    assert dict(expanded.env) == {"A": "t0k3n-o", "LITERAL": "$TOKEN"}
    with pytest.raises(MissingSecret) as missing:
        ServerConfig("s", command="x", env={"A": "${HOME_TOKEN}"}).expanded({})
    assert missing.value.names == ["HOME_TOKEN"]
    assert "HOME_TOKEN" in str(missing.value)
