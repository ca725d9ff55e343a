"""`burrow serve`'s descriptors at start (burrow/descriptors.py): nothing it inherited
reaches a sandboxed shell or any other child, and it takes its whole open-file allowance."""

from __future__ import annotations

import os
import resource
import tempfile
from pathlib import Path

import httpx
from websockets.sync.client import connect

from tests.api.harness import ADMIN_PASSWORD, serve_process
from tests.cli.test_serve_shutdown import read_until


def _holders(target: str, but: int) -> list[str]:
    """Processes (other than `but`) with a descriptor open on `target`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == but:
            continue
        try:
            links = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:
            continue
        if target in links:
            found.append(proc.name)
    return found


def test_an_inherited_descriptor_is_not_open_in_a_sandboxed_shell(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    secret = tempfile.NamedTemporaryFile(dir=tmp_path)  # noqa: SIM115 - closed below
    os.set_inheritable(write_end, True)
    os.set_inheritable(secret.fileno(), True)
    pipe = f"pipe:[{os.fstat(write_end).st_ino}]"
    try:
        with (
            serve_process(tmp_path / "data", "demo", pass_fds=(write_end, secret.fileno())) as (
                process,
                base,
            ),
            httpx.Client(base_url=base) as api,
        ):
            login = {"username": "admin", "password": ADMIN_PASSWORD}
            assert api.post("/api/auth/login", json=login).status_code == 200
            cookie = api.cookies["burrow_session"]
            cid = api.post("/api/conversations", json={}).json()["id"]
            tid = api.post(f"/api/conversations/{cid}/terminals", json={}).json()["terminal_id"]
            url = f"{base.replace('http', 'ws', 1)}/api/conversations/{cid}/terminals/{tid}/ws"
            with connect(url, additional_headers={"Cookie": f"burrow_session={cookie}"}) as ws:
                assert _holders(pipe, os.getpid()) == [str(process.pid)]  # the server has it
                ws.send(
                    f"ls -l /proc/self/fd; echo LEAKED >&{write_end}; "
                    f"echo LEAKED >/proc/self/fd/{secret.fileno()}; echo DONE-$((6*7))\n".encode()
                )
                read_until(ws, b"DONE-42")
                # Not in the shell, nor in any other child of the server (bwrap, the
                # sandbox's agent, slirp4netns): the server alone holds it.
                assert _holders(pipe, os.getpid()) == [str(process.pid)]
            os.set_blocking(read_end, False)
            try:
                leaked = os.read(read_end, 100)
            except BlockingIOError:
                leaked = b""
            assert leaked == b""
            assert Path(secret.name).read_bytes() == b""
    finally:
        os.close(read_end)
        os.close(write_end)
        secret.close()


def _soft_limit_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit")


def test_the_soft_open_file_limit_is_raised_to_the_hard_one(tmp_path: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    def usual_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))

    with serve_process(tmp_path, "demo", preexec_fn=usual_soft_limit) as (process, _):
        assert _soft_limit_of(process.pid) == hard
