"""What Burrow lets git reach, and how it hands git a credential.

Remotes are `https://`, `http://` or `git://` URLs. `ssh` is refused: it needs keys and
known hosts Burrow does not manage, and host names that look like options have been a way
into `ssh` before. `file://`, local paths and `ext::` are refused: they would read the
sandbox's own files or run a command instead of contacting a remote. A URL holding a user
name or password is refused too: git writes the URL into `.git/config`, so a credential
belongs in a secret. Values that start with `-` never reach git's command line.

The credential reaches git through a credential helper given with `-c` (never written to
any config file) that prints an environment variable of that one git process; the helper
is scoped to the validated URL's scheme, host and port, so a URL rewritten by the
repository's own config (`url.*.insteadOf`) never receives it. The same `-c` options switch off
what a repository's config could make git run (hooks, fsmonitor) while it holds the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

SCHEMES = ("https", "http", "git")
MAX_URL = 2048
MAX_REF = 255
CREDENTIAL_ENV = "BURROW_GIT_PASSWORD"
# GitHub's name for a token used as a password; other forges accept any user name with one.
CREDENTIAL_USER = "x-access-token"
REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/+-]*")
REMOTE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


class GitRefused(ValueError):
    """A URL, ref or name git is not given; `code` names the field, the message the fix."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Remote:
    url: str
    scheme: str
    origin: str  # scheme://host[:port], what the credential is scoped to
    path: str


def check_url(url: str) -> Remote:
    if not url or len(url) > MAX_URL:
        raise GitRefused("invalid_repo_url", f"A repository URL has 1 to {MAX_URL} characters.")
    if url.startswith("-") or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise GitRefused(
            "invalid_repo_url", "A repository URL cannot start with '-' or hold spaces."
        )
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or "::" in url.split("/", 1)[0]:
        raise GitRefused(
            "invalid_repo_url",
            f"Only {', '.join(s + '://' for s in SCHEMES)} repository URLs are cloned "
            "(not file://, ssh, ext:: or a local path).",
        )
    if "@" in parts.netloc:
        raise GitRefused(
            "invalid_repo_url",
            "Put no user name or password in the URL (git would store it in .git/config): "
            "save the token as a secret and choose it.",
        )
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or host.startswith("-"):
        raise GitRefused("invalid_repo_url", "The repository URL names no host.")
    origin = (
        f"{parts.scheme}://{parts.netloc}" if port is None else f"{parts.scheme}://{host}:{port}"
    )
    return Remote(url, parts.scheme, origin, parts.path)


def check_ref(ref: str, what: str = "ref") -> str:
    """A branch or tag name as git accepts it, never an option."""
    if (
        len(ref) > MAX_REF
        or not REF.fullmatch(ref)
        or ".." in ref
        or "//" in ref
        or ref.endswith((".lock", "/", "."))
        or "/." in ref
    ):
        raise GitRefused(
            f"invalid_{what}",
            f"{ref[:80]!r} is not a {what} name: letters, digits and . _ / + -, not starting "
            "with - or ., no '..'.",
        )
    return ref


def check_remote_name(name: str) -> str:
    if not REMOTE.fullmatch(name):
        raise GitRefused("invalid_remote", f"{name[:80]!r} is not a remote name (e.g. origin).")
    return name


def github_repository(remote: Remote) -> tuple[str, str]:
    """owner and repository of a GitHub remote: the last two parts of its path."""
    parts = [p for p in remote.path.removesuffix("/").removesuffix(".git").split("/") if p]
    if len(parts) < 2 or not all(NAME.fullmatch(p) for p in parts[-2:]):
        raise GitRefused("no_remote", f"{remote.url} does not name a repository as owner/name.")
    return parts[-2], parts[-1]


def git_options(remote: Remote | None, *, with_credential: bool) -> list[str]:
    """`-c` options for every git command Burrow runs in a sandbox."""
    options = [
        # Only network transports; submodules and redirects cannot switch to file:// or ext::.
        "protocol.allow=never",
        *(f"protocol.{s}.allow=always" for s in SCHEMES),
        "core.hooksPath=/dev/null",  # a planted hook would run with the credential at hand
        "core.fsmonitor=false",
        "http.sslVerify=true",
        "credential.helper=",  # forget every helper the repository or system configured
    ]
    if with_credential and remote is not None:
        helper = (
            f'!f() {{ test "$1" = get && printf "username=%s\\npassword=%s\\n" '
            f'{CREDENTIAL_USER} "${CREDENTIAL_ENV}"; }}; f'
        )
        options.append(f"credential.{remote.origin}.helper={helper}")
    return [arg for option in options for arg in ("-c", option)]
