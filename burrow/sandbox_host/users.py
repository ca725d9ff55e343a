"""E2B's users in the host's sandboxes.

On E2B a sandbox has the account `user` (uid 1000, home /home/user), and envd acts as it
unless a call names another: commands run as it, and what the files API makes is its.
`Sandbox(..., user="root")` or `commands.run(..., user="root")` acts as root. Here each
sandbox's writable root gets that account when it is made (`ACCOUNT`, run as the sandbox's
root: uid 1000 where the base leaves it free, else the next free one, as useradd picks),
and /home/user (the workspace, local.py `home`) becomes its. A command for `user` is
started through `setpriv` by the sandbox's root, which drops every capability with the
uid; root's commands are the sandbox's root as before. The files API itself is the
guest (root): what it writes for `user` is handed to `user` after (`chown`), and its
mkdir, mv and rm run as the caller, so the caller's permissions hold as in envd.

The caller is named as envd takes it: `Authorization: Basic base64("<user>:")` on Connect
calls, `?username=` on the file routes; neither means `user`. A sandbox without a writable
root (no subordinate id range on the host) has no second account: every call acts as its
one user, whatever it names (`HostedSandbox.users` is False).
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import posixpath
import re
import shlex

from burrow.sandbox.backend import (
    ErrorCode,
    ExecExit,
    ExecRequest,
    Sandbox,
    SandboxError,
    closing_exec,
)

E2B_USER, E2B_HOME, ROOT = "user", "/home/user", "root"
E2B_UID = 1000
USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


class BadUser(ValueError):
    pass


def account(user: str) -> list[str]:
    """Shell lines that make `user` (with a group of its name) where it is missing."""
    if user == ROOT:
        return []
    home = E2B_HOME if user == E2B_USER else f"/home/{user}"
    quoted = shlex.quote(user)
    free = f"$(getent passwd {E2B_UID} >/dev/null || echo '-u {E2B_UID}')"  # words, unquoted
    uid = free if user == E2B_USER else ""
    made = f"id -u {quoted} >/dev/null 2>&1 || useradd -M -U {uid} -d {home} -s /bin/bash {quoted}"
    return [made, f"mkdir -p {home} && chown {quoted}: {home}"]


# E2B's base image has `python` (its python3); a Debian system has only `python3`, and
# code written for E2B runs `python`. Where there is none, the sandbox's own root gets one.
PYTHON = (
    "command -v python >/dev/null || ! command -v python3 >/dev/null || "
    'ln -s "$(command -v python3)" /usr/local/bin/python'
)

# What a new sandbox runs as its root before it is handed out (registry.py): the account,
# /home/user its, `python`. It prints `ok` last, so a sandbox that could not (a read-only
# root) is known to have one user only.
ACCOUNT = "\n".join(["set -e", *account(E2B_USER), PYTHON, "echo ok"])

current_user: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_user", default=None
)
"""Who an envd request names (set by the app from its Authorization header); None: the
sandbox's default (`HostedSandbox.user`: `user`, or its template's last USER)."""


def from_authorization(header: bytes | None) -> str | None:
    """The user a Connect call names (`Basic base64("user:")`), else None."""
    if not header:
        return None
    scheme, _, value = header.decode("latin-1").partition(" ")
    if scheme.lower() != "basic":
        raise BadUser("Authorization: Basic base64('<user>:') names the user, nothing else.")
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise BadUser("Authorization: not base64 of '<user>:'.") from None
    name = decoded.partition(":")[0]
    return checked(name) if name else None


def checked(user: str) -> str:
    if not USER_NAME.fullmatch(user):
        raise BadUser(f"{user[:40]!r} is not a user name.")
    return user


def command(argv: list[str], user: str, users: bool) -> list[str]:
    """`argv` as `user` runs it (root's, or a sandbox with one user: as it is)."""
    if user == ROOT or not users:
        return argv
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--", *argv]


def lookup(program: str, user: str, users: bool) -> list[str] | None:
    """A command that fails when `user` cannot find `program` (as PATH resolves it), or
    None when no lookup is needed. setpriv's own exec failure would be an exit 127 of a
    process that started; envd (and the guest, for root) refuse a missing program before
    anything runs, and clients tell "command not found" from an exit."""
    if user == ROOT or not users:
        return None
    return command(["sh", "-c", 'command -v -- "$1" >/dev/null', "sh", program], user, users)


def environment(user: str, users: bool) -> dict[str, str]:
    """What envd sets for the user a process runs as."""
    if not users:
        return {}
    home = "/root" if user == ROOT else E2B_HOME if user == E2B_USER else f"/home/{user}"
    return {"HOME": home, "USER": user, "LOGNAME": user}


async def missing(sandbox: Sandbox, path: str) -> list[str]:
    """`path` and its ancestors that are not there yet: what a write would make."""
    made: list[str] = []
    while path not in ("/", ""):
        try:
            await sandbox.stat(path)
            break
        except SandboxError as exc:
            if exc.code != ErrorCode.NOT_FOUND:
                break  # the write says what is wrong
        made.append(path)
        path = posixpath.dirname(path)
    return made


async def hand_over(sandbox: Sandbox, paths: list[str], user: str, users: bool) -> None:
    """What the files API (the guest, root) made for `user` becomes `user`'s, as envd
    would have made it (`missing` before the write: a file that was there keeps its owner)."""
    if user == ROOT or not users or not paths:
        return
    request = ExecRequest(argv=["chown", "-h", f"{user}:", "--", *paths], timeout=60.0)
    async with closing_exec(sandbox.exec(request)) as events:
        async for event in events:
            if isinstance(event, ExecExit) and event.exit_code != 0:
                raise SandboxError(
                    ErrorCode.NOT_FOUND, f"No user {user!r} in this sandbox to own {paths[0]}."
                )
