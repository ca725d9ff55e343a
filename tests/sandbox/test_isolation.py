"""What a sandboxed command can and cannot see or do."""

from __future__ import annotations

import os

import pytest

from burrow.sandbox.local import LocalBackend, LocalSandbox
from tests.sandbox.harness import run


async def test_secrets_of_the_host_are_not_visible(sandbox: LocalSandbox) -> None:
    # The sandbox's own shadow files (its root is writable: rootfs.py), every password
    # locked; never the host's.
    shadow = (await run(sandbox, "cat", "/etc/shadow", "/etc/gshadow")).text
    assert shadow and all(line.split(":")[1] == "*" for line in shadow.splitlines())
    assert (await run(sandbox, "cat", "/etc/passwd")).exit.exit_code == 0


async def test_the_data_dir_and_other_workspaces_are_not_visible(backend: LocalBackend) -> None:
    first = await backend.create("first")
    second = await backend.create("second")
    await second.write_file("secret.txt", b"second's")
    for path in (str(backend.data_dir), str(backend.workspace_dir("second")), "/work"):
        result = await run(first, "ls", "-d", path)
        assert result.exit.exit_code != 0, f"{path} is visible inside the sandbox"
    listing = await run(first, "sh", "-c", "ls -a /workspace; ls /")
    assert "secret.txt" not in listing.text


async def test_the_server_environment_does_not_leak(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-must-not-leak")
    sandbox = await backend.create("env")
    env = (await run(sandbox, "env")).text
    assert "sk-test-must-not-leak" not in env
    assert "OPENAI_API_KEY" not in env
    names = {line.split("=", 1)[0] for line in env.splitlines()}
    assert names <= {"PATH", "HOME", "LANG", "TERM", "PWD", "SHLVL", "_"}
    assert "HOME=/workspace" in env


async def test_no_admin_capability_the_host_s_system_untouched_and_no_network(
    sandbox: LocalSandbox,
) -> None:
    status = (await run(sandbox, "cat", "/proc/self/status")).text
    effective = int(status.split("CapEff:\t")[1].split()[0], 16)
    assert not effective & (1 << 21), "CAP_SYS_ADMIN"  # the package tools' set only
    assert (await run(sandbox, "touch", "/usr/burrow-was-here")).exit.exit_code == 0
    assert not os.path.exists("/usr/burrow-was-here")  # noqa: ASYNC240 (its layer, not the host's)
    probe = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        "    print('blocked', exc.errno)\n"
    )
    assert (await run(sandbox, "python3", "-c", probe)).text.startswith("blocked")
    assert (await run(sandbox, "hostname")).text == "burrow\n"


async def test_tmp_is_private_to_each_sandbox(backend: LocalBackend) -> None:
    first = await backend.create("first")
    second = await backend.create("second")
    await run(first, "sh", "-c", "echo mine > /tmp/note")
    assert (await run(second, "cat", "/tmp/note")).exit.exit_code != 0
