"""E2B's users in the host's sandboxes, through the stock SDK: `user` (home /home/user) is
who commands run as and whose the files API's files are; `user="root"` is the sandbox's
root; a malformed user is refused before anything runs."""

from __future__ import annotations

import base64

import httpx
import pytest
from e2b import AsyncSandbox, CommandExitException, PtySize, SandboxException

from tests.sandbox_host.harness import Host

pytestmark = pytest.mark.timeout(90)


async def test_commands_run_as_user_in_its_home_and_as_root_when_asked(
    sandbox: AsyncSandbox,
) -> None:
    mine = await sandbox.commands.run("whoami; pwd; echo $HOME $USER; id -u; stat -c %U .")
    name, cwd, env, uid, home_owner = mine.stdout.splitlines()
    assert (name, cwd, env, home_owner) == ("user", "/home/user", "/home/user user", "user")
    passwd = await sandbox.files.read("/etc/passwd")
    # uid 1000 as on E2B, unless the base's own accounts hold it (then the next free).
    assert f"user:x:{uid}:" in passwd and int(uid) >= 1000
    with pytest.raises(CommandExitException) as refused:
        await sandbox.commands.run("touch /etc/mine")  # not root: the system is not its
    assert "Permission denied" in refused.value.stderr

    root = await sandbox.commands.run("whoami; echo $HOME; touch /etc/mine", user="root")
    assert root.stdout.splitlines() == ["root", "/root"]
    # E2B's image has `python`; the sandbox's root got one where its base had python3 only.
    python = await sandbox.commands.run("python -c 'import sys; print(sys.version_info[0])'")
    assert python.stdout == "3\n"
    terminal = await sandbox.pty.create(size=PtySize(rows=24, cols=80), on_data=lambda _: None)
    await sandbox.pty.send_stdin(terminal.pid, b"whoami > who.txt; exit\n")
    await terminal.wait()
    assert await sandbox.files.read("who.txt") == "user\n"


async def test_the_files_api_makes_files_for_its_caller(sandbox: AsyncSandbox) -> None:
    await sandbox.files.write("made/deep/a.txt", "a")
    for path in ("made", "made/deep", "made/deep/a.txt"):
        assert (await sandbox.files.get_info(path)).owner == "user", path
    # ...so the user's commands may change what the API wrote, as on E2B.
    await sandbox.commands.run("echo more >> made/deep/a.txt && rm -r made/deep")
    await sandbox.files.write("/opt/root.txt", "r", user="root")
    assert (await sandbox.files.get_info("/opt/root.txt")).owner == "root"
    assert await sandbox.files.make_dir("/opt/d", user="root")
    with pytest.raises(SandboxException):  # mkdir runs as the caller: /opt is root's
        await sandbox.files.make_dir("/opt/e")
    with pytest.raises(SandboxException):
        await sandbox.files.remove("/opt/root.txt")
    assert await sandbox.files.exists("/opt/root.txt")


async def test_a_malformed_user_is_refused(sdk: Host, sandbox: AsyncSandbox) -> None:
    headers = {
        "E2b-Sandbox-Id": sandbox.sandbox_id,
        "E2b-Sandbox-Port": "49983",
        "X-Access-Token": sandbox._envd_access_token or "",
    }
    async with httpx.AsyncClient(base_url=sdk.url) as client:
        for bad in ("Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"../etc:").decode()):
            answer = await client.post(
                "/filesystem.Filesystem/MakeDir",
                json={"path": "/home/user/x"},
                headers={**headers, "Authorization": bad},
            )
            assert answer.status_code == 400, bad
        answer = await client.post(
            "/files",
            params={"path": "x.txt", "username": "root;id"},
            content=b"x",
            headers=headers,
        )
        assert answer.status_code == 400 and "not a user name" in answer.text
    assert not await sandbox.files.exists("x") and not await sandbox.files.exists("x.txt")
