"""The MCP servers an administrator configured: `mcp.json` in the data directory.

The file has the form desktop clients use, `{"mcpServers": {name: {command, args, env,
host?} | {url, headers}}}`. A stdio server runs inside the conversation's sandbox unless
`"host": true`. `${NAME}` in `args`, `env` and `headers` is replaced by the secret NAME
the conversation chose (of its owner's), never by an unchosen one or by anything in the
server's own environment; an HTTP server's headers get them only when its URL is listed
in `BURROW_MCP_ALLOW_URLS` (connections.py).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

FILE_NAME = "mcp.json"
NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")  # the server's part of `mcp__<server>__<tool>`
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_FILE_BYTES = 256 * 1024


class ConfigError(ValueError):
    """mcp.json (or one server in it) cannot be used; the message says what to fix."""


class MissingSecret(ConfigError):
    def __init__(self, server: str, names: list[str]) -> None:
        self.names = names
        super().__init__(
            f"MCP server {server!r} needs the secret(s) {', '.join(names)}: add them under "
            "Settings → Secrets and choose them for this conversation; the server's tools "
            "are left out until then."
        )


@dataclass(frozen=True)
class ServerConfig:
    name: str
    command: str | None = None  # stdio: the program and its arguments
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    host: bool = False  # stdio on the host instead of in the sandbox (admin's choice)
    url: str | None = None  # Streamable HTTP, reached from the host
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        if self.url is not None:
            return "http"
        return "host" if self.host else "sandbox"

    def placeholders(self) -> list[str]:
        """The secret names this server's configuration refers to."""
        texts = [*self.args, *self.env.values(), *self.headers.values()]
        return sorted({m for text in texts for m in PLACEHOLDER.findall(text)})

    def expanded(self, secrets: Mapping[str, str]) -> ServerConfig:
        """The configuration with every `${NAME}` replaced; MissingSecret names the absent."""
        missing = [n for n in self.placeholders() if n not in secrets]
        if missing:
            raise MissingSecret(self.name, missing)

        def fill(text: str) -> str:
            return PLACEHOLDER.sub(lambda m: secrets[m.group(1)], text)

        return replace(
            self,
            args=tuple(fill(a) for a in self.args),
            env={k: fill(v) for k, v in self.env.items()},
            headers={k: fill(v) for k, v in self.headers.items()},
        )


@dataclass(frozen=True)
class McpConfig:
    servers: tuple[ServerConfig, ...] = ()
    problems: tuple[tuple[str, str], ...] = ()  # (server or "mcp.json", what is wrong)


def load(data_dir: Path) -> McpConfig:
    """The servers of `<data_dir>/mcp.json`; no file means none. A broken file or entry is
    a problem shown on the servers route, never a failed start."""
    path = data_dir / FILE_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return McpConfig()
    except OSError as exc:
        return McpConfig(problems=((FILE_NAME, f"cannot be read: {exc.strerror}"),))
    if len(raw) > MAX_FILE_BYTES:
        return McpConfig(problems=((FILE_NAME, f"is larger than {MAX_FILE_BYTES} bytes"),))
    try:
        document = json.loads(raw)
    except ValueError as exc:
        return McpConfig(problems=((FILE_NAME, f"is not valid JSON: {exc}"),))
    return parse(document)


def parse(document: object) -> McpConfig:
    entries = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        return McpConfig(problems=((FILE_NAME, 'needs an object "mcpServers"'),))
    servers, problems = [], []
    for name, entry in entries.items():
        try:
            servers.append(_server(str(name), entry))
        except ConfigError as exc:
            problems.append((str(name), str(exc)))
    return McpConfig(tuple(servers), tuple(problems))


def _server(name: str, entry: object) -> ServerConfig:
    if not NAME.match(name):
        raise ConfigError("a server name is 1-32 letters, digits, '_' or '-'")
    if not isinstance(entry, dict):
        raise ConfigError("a server is an object with `command` or `url`")
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise ConfigError("a server has either `command` (stdio) or `url` (HTTP), not both")
    if url is not None:
        if not isinstance(url, str) or not re.match(r"^https?://", url):
            raise ConfigError("`url` must be an http:// or https:// address")
        return ServerConfig(name, url=url, headers=_strings(entry, "headers"))
    if not isinstance(command, str) or not command:
        raise ConfigError("`command` must be a non-empty string")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError("`args` must be a list of strings")
    host = entry.get("host", False)
    if not isinstance(host, bool):
        raise ConfigError("`host` must be true or false")
    env = _strings(entry, "env")
    return ServerConfig(name, command=command, args=tuple(args), env=env, host=host)


def _strings(entry: dict[str, Any], key: str) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(f"`{key}` must be an object of strings")
    return dict(value)


def read_document(data_dir: Path) -> dict[str, Any]:
    """mcp.json as it is on disk (an empty list of servers when there is none or it is
    unreadable); for the administrator's editor."""
    try:
        document = json.loads((data_dir / FILE_NAME).read_bytes()[:MAX_FILE_BYTES])
    except (OSError, ValueError):
        return {"mcpServers": {}}
    return document if isinstance(document, dict) else {"mcpServers": {}}


def replace_document(data_dir: Path, document: dict[str, Any]) -> McpConfig:
    """Write mcp.json from the settings page, whole or not at all. Refused (ConfigError)
    when an entry is malformed, or when it adds or changes a `"host": true` server: code
    on the host is the machine owner's choice, made in the file itself, not a web admin's."""
    encoded = json.dumps(document, indent=2).encode()
    if len(encoded) > MAX_FILE_BYTES:
        raise ConfigError(f"mcp.json may be at most {MAX_FILE_BYTES} bytes")
    config = parse(document)
    if config.problems:
        raise ConfigError("; ".join(f"{name}: {what}" for name, what in config.problems))
    current = read_document(data_dir).get("mcpServers")
    current = current if isinstance(current, dict) else {}
    for name, entry in document["mcpServers"].items():
        if entry.get("host") and current.get(name) != entry:
            raise ConfigError(
                f'{name}: a server on the host (`"host": true`) is added or changed only in '
                f"{FILE_NAME} on the server itself"
            )
    path = data_dir / FILE_NAME
    staged = data_dir / f".{FILE_NAME}.new"
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(encoded)
    os.replace(staged, path)
    return config
