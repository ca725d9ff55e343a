"""Hostile clients of a sandbox host: wrong keys and tokens, other keys' sandboxes, path
escapes, huge bodies and frames, floods. Each gets a precise refusal and the host stays
responsive."""

from __future__ import annotations

import asyncio
import gzip
import json
import struct
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from e2b import AsyncSandbox
from e2b.exceptions import SandboxException

from burrow.sandbox import idmap
from tests.sandbox.test_escape import OPEN_PROC_FOR_WRITING
from tests.sandbox_host.harness import API_KEY, OTHER_KEY, Host, sandbox_host

pytestmark = pytest.mark.timeout(120)
UPLOAD_CAP = 1024 * 1024


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """A host with small caps, so the attacks reach them quickly."""
    env = {
        "BURROW_SANDBOX_HOST_MAX_UPLOAD_MB": "1",
        "BURROW_SANDBOX_HOST_MAX_SANDBOXES": "3",
        "BURROW_SANDBOX_HOST_MAX_PAUSED": "2",
    }
    with sandbox_host(tmp_path_factory.mktemp("attacked") / "data", **env) as running:
        yield running


@pytest.fixture
async def api(host: Host) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=host.url, timeout=30) as client:
        yield client


def envd(sandbox: AsyncSandbox, token: str | None = None) -> dict[str, str]:
    headers = {"E2b-Sandbox-Id": sandbox.sandbox_id, "E2b-Sandbox-Port": "49983"}
    token = sandbox._envd_access_token if token is None else token
    if token:
        headers["X-Access-Token"] = token
    return headers


async def assert_responsive(client: httpx.AsyncClient) -> None:
    started = time.monotonic()
    assert (await client.get("/health")).status_code == 200
    assert time.monotonic() - started < 1.0


async def test_missing_or_wrong_api_keys_are_refused(api: httpx.AsyncClient) -> None:
    for headers in ({}, {"X-API-KEY": "e2b_wrong"}, {"X-API-KEY": API_KEY + "x"}):
        for method, path in (
            ("POST", "/v2/sandboxes"),
            ("GET", "/v2/sandboxes"),
            ("GET", "/sandboxes/ianything"),
            ("DELETE", "/sandboxes/ianything"),
        ):
            answer = await api.request(method, path, headers=headers, json={"templateID": "base"})
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.json()["error_code"] == "unauthorized"


async def test_another_keys_sandbox_is_not_found(
    sandbox: AsyncSandbox, api: httpx.AsyncClient
) -> None:
    other = {"X-API-KEY": OTHER_KEY}
    sid = sandbox.sandbox_id
    for method, path, body in (
        ("GET", f"/sandboxes/{sid}", None),
        ("DELETE", f"/sandboxes/{sid}", None),
        ("POST", f"/sandboxes/{sid}/timeout", {"timeout": 1}),
        ("POST", f"/sandboxes/{sid}/pause", {}),
        ("POST", f"/v2/sandboxes/{sid}/connect", {"timeout": 10}),
    ):
        answer = await api.request(method, path, headers=other, json=body)
        assert answer.status_code == 404, (path, answer.text)
        assert answer.json()["error_code"] == "sandbox_not_found"
    listed = await api.get("/v2/sandboxes", headers=other)
    assert sid not in [s["sandboxID"] for s in listed.json()]
    assert (await sandbox.get_info()).state.value == "running"  # untouched


async def test_envd_needs_the_sandboxs_own_token(sdk: Host, api: httpx.AsyncClient) -> None:
    first, second = await AsyncSandbox.create(), await AsyncSandbox.create()
    try:
        await first.files.write("secret.txt", "mine")
        stolen = second._envd_access_token
        for token in ("", "wrong", stolen):
            headers = envd(first, token)
            if not token:
                headers.pop("X-Access-Token", None)
            answer = await api.get("/files", params={"path": "secret.txt"}, headers=headers)
            assert answer.status_code == 401, answer.text
            rpc = await api.post(
                "/process.Process/List",
                headers={**headers, "Content-Type": "application/json"},
                content=b"{}",
            )
            assert rpc.status_code == 401
        unknown = await api.get(
            "/files", params={"path": "x"}, headers=envd(first) | {"E2b-Sandbox-Id": "inope"}
        )
        assert unknown.status_code == 502
        assert "was not found" in unknown.json()["message"]
    finally:
        await first.kill()
        await second.kill()


async def test_paths_reach_the_sandbox_s_own_tree_only(
    sandbox: AsyncSandbox, api: httpx.AsyncClient, host: Host
) -> None:
    """E2B's files API serves the sandbox's whole tree, which is its own: /etc/passwd is
    the sandbox's copy, the host's files are not there to name, and the kernel's views
    (another process's environ) and the guest's code are refused however they are named."""
    await sandbox.commands.run("ln -s /proc/1 proc1 && ln -s /.burrow guest")
    own = await api.get("/files", params={"path": "/etc/passwd"}, headers=envd(sandbox))
    assert own.status_code == 200 and b"root:" in own.content
    host_file = str(host.data_dir / "sandbox-host.json")  # the host's: not in the sandbox
    missing = await api.get("/files", params={"path": host_file}, headers=envd(sandbox))
    assert missing.status_code == 404, missing.text
    for path in (
        "/proc/1/environ",
        "/proc/self/environ",
        "../../proc/1/environ",
        "proc1/environ",
        "/sys/kernel/notes",
        "/.burrow/guest/server.py",
        "guest/guest/server.py",
    ):
        read = await api.get("/files", params={"path": path}, headers=envd(sandbox))
        assert read.status_code == 403, (path, read.text)
        written = await api.post(
            "/files",
            params={"path": path},
            headers={**envd(sandbox), "Content-Type": "application/octet-stream"},
            content=b"x",
        )
        assert written.status_code == 403, (path, written.text)
    for rpc, body in (
        ("Stat", {"path": "/proc/1/environ"}),
        ("ListDir", {"path": "/proc", "depth": 1}),
        ("ListDir", {"path": "/.burrow/guest", "depth": 1}),
        ("Remove", {"path": "/"}),
        ("Remove", {"path": "/home/user"}),  # the workspace itself
        ("Remove", {"path": "/workspace"}),
        ("MakeDir", {"path": "/proc/x"}),
        ("Move", {"source": "/.burrow/guest", "destination": "/tmp/guest"}),
    ):
        answer = await api.post(
            f"/filesystem.Filesystem/{rpc}",
            headers={**envd(sandbox), "Content-Type": "application/json"},
            content=json.dumps(body).encode(),
        )
        assert answer.status_code == 403, (rpc, body, answer.text)
        assert answer.json()["code"] == "permission_denied"
    nul = await api.get("/files", params={"path": "a\x00b"}, headers=envd(sandbox))
    assert nul.status_code == 400


async def test_huge_uploads_are_refused_and_the_host_stays_up(
    sandbox: AsyncSandbox, api: httpx.AsyncClient
) -> None:
    headers = {**envd(sandbox), "Content-Type": "application/octet-stream"}
    declared = await api.post(
        "/files", params={"path": "big"}, headers=headers, content=b"x" * (UPLOAD_CAP + 1)
    )
    assert declared.status_code == 413
    assert "BURROW_SANDBOX_HOST_MAX_UPLOAD_MB" in declared.json()["message"]

    async def endless() -> AsyncIterator[bytes]:  # chunked, no length: counted as it comes
        for _ in range(64):
            yield b"y" * 65536

    streamed = await api.post("/files", params={"path": "big"}, headers=headers, content=endless())
    assert streamed.status_code == 413
    multipart = await api.post(
        "/files",
        params={"path": "big"},
        headers=envd(sandbox),
        files={"file": ("big", b"z" * (UPLOAD_CAP + 10))},
    )
    assert multipart.status_code == 413
    assert not await sandbox.files.exists("big")
    at_cap = await api.post(
        "/files", params={"path": "ok"}, headers=headers, content=b"o" * UPLOAD_CAP
    )
    assert at_cap.status_code == 200
    await assert_responsive(api)


async def test_oversized_and_garbled_connect_frames(
    sandbox: AsyncSandbox, api: httpx.AsyncClient
) -> None:
    headers = {**envd(sandbox), "Content-Type": "application/connect+json"}
    huge = json.dumps({"process": {"cmd": "/bin/echo", "args": ["x" * (5 << 20)]}}).encode()
    answer = await api.post(
        "/process.Process/Start", headers=headers, content=struct.pack(">BI", 0, len(huge)) + huge
    )
    assert b"resource_exhausted" in answer.content
    lying = struct.pack(">BI", 0, 1 << 31) + b"{}"  # declares 2 GiB, sends 2 bytes
    answer = await api.post("/process.Process/Start", headers=headers, content=lying)
    assert b"resource_exhausted" in answer.content
    garbled = await api.post(
        "/filesystem.Filesystem/Stat",
        headers={**envd(sandbox), "Content-Type": "application/json"},
        content=b"{not json",
    )
    assert garbled.status_code == 400
    await assert_responsive(api)


async def test_command_and_sandbox_floods_meet_caps(
    sandbox: AsyncSandbox, api: httpx.AsyncClient
) -> None:
    handles = await asyncio.gather(
        *(sandbox.commands.run("sleep 30", background=True) for _ in range(64))
    )
    with pytest.raises(SandboxException, match="64 processes"):
        await sandbox.commands.run("echo one too many")
    await asyncio.gather(*(h.kill() for h in handles))

    others = [await AsyncSandbox.create() for _ in range(2)]  # 3 with `sandbox`: the cap
    try:
        refused = await api.post(
            "/v2/sandboxes", headers={"X-API-KEY": API_KEY}, json={"templateID": "base"}
        )
        assert refused.status_code == 429
        assert refused.json()["error_code"] == "sandbox_limit"
        other_key = await api.post("/v2/sandboxes", headers={"X-API-KEY": OTHER_KEY}, json={})
        assert other_key.status_code == 201  # one key's cap is not another's
        await api.delete(
            f"/sandboxes/{other_key.json()['sandboxID']}", headers={"X-API-KEY": OTHER_KEY}
        )
    finally:
        for other in others:
            await other.kill()


async def test_a_flood_of_output_nobody_reads_does_not_stall_the_host(
    sandbox: AsyncSandbox, api: httpx.AsyncClient
) -> None:
    handle = await sandbox.commands.run("yes flood", background=True, retain_output=False)
    await handle.disconnect()  # nobody reads: the pump drops it, the host stays responsive
    await asyncio.sleep(1)
    await assert_responsive(api)
    assert (await sandbox.commands.run("echo still")).stdout == "still\n"
    await sandbox.commands.kill(handle.pid)


async def test_bad_requests_get_precise_errors(api: httpx.AsyncClient) -> None:
    key = {"X-API-KEY": API_KEY}
    cases = (
        ({"templateID": "code-interpreter-v1"}, 404, "template_not_found"),
        ({"timeout": "soon"}, 400, "invalid_request"),
        ({"metadata": {"k": 1}}, 400, "invalid_request"),
        ({"envVars": {f"V{i}": "x" for i in range(300)}}, 400, "invalid_request"),
    )
    for body, status, code in cases:
        answer = await api.post("/v2/sandboxes", headers=key, json=body)
        assert (answer.status_code, answer.json()["error_code"]) == (status, code), body
    garbled = await api.post("/v2/sandboxes", headers=key, content=b"{oops")
    assert garbled.json()["error_code"] == "invalid_json"
    huge = await api.post("/v2/sandboxes", headers=key, content=b"[" * (1 << 20))
    assert huge.status_code == 413


async def test_a_gzip_bomb_is_inflated_only_to_the_cap(
    sandbox: AsyncSandbox, api: httpx.AsyncClient
) -> None:
    bomb = gzip.compress(b"\0" * (64 * UPLOAD_CAP))  # 64 MiB of zeros in ~64 KiB
    headers = {
        **envd(sandbox),
        "Content-Type": "application/octet-stream",
        "Content-Encoding": "gzip",
    }
    answer = await api.post("/files", params={"path": "bomb"}, headers=headers, content=bomb)
    assert answer.status_code == 413
    corrupt = await api.post(
        "/files", params={"path": "bomb"}, headers=headers, content=b"not gzip"
    )
    assert corrupt.status_code == 400
    await assert_responsive(api)


async def test_junk_ports_and_paused_floods(sandbox: AsyncSandbox, api: httpx.AsyncClient) -> None:
    for port in ("9" * 5000, "abc", "70000", "0"):
        headers = {**envd(sandbox), "E2b-Sandbox-Port": port}
        answer = await api.get("/", headers=headers)
        assert answer.status_code == 400, (port[:10], answer.text)
        assert "not a TCP port" in answer.json()["message"]
    key = {"X-API-KEY": API_KEY}
    paused = []
    try:
        for _ in range(3):
            created = await api.post("/v2/sandboxes", headers=key, json={})
            sid = created.json()["sandboxID"]
            paused.append(sid)
            answer = await api.post(f"/sandboxes/{sid}/pause", headers=key, json={})
            if len(paused) <= 2:
                assert answer.status_code == 204, answer.text
            else:
                assert answer.status_code == 429
                assert "BURROW_SANDBOX_HOST_MAX_PAUSED" in answer.json()["message"]
    finally:
        for sid in paused:
            await api.delete(f"/sandboxes/{sid}", headers=key)


# A hostile service in the sandbox: answers every connection with bytes that are not HTTP.
GARBAGE_SERVER = r"""
import socket
listener = socket.create_server(("127.0.0.1", 8003))
while True:
    conn, _ = listener.accept()
    conn.recv(65536)
    conn.sendall(b"\x00\xff not http at all\r\n" * 1000)
    conn.close()
"""


async def test_a_hostile_service_behind_a_port(
    sandbox: AsyncSandbox, api: httpx.AsyncClient
) -> None:
    await sandbox.files.write("garbage.py", GARBAGE_SERVER)
    await sandbox.commands.run("exec python3 garbage.py", background=True)
    headers = {**envd(sandbox), "E2b-Sandbox-Port": "8003"}
    for _ in range(100):
        answer = await api.get("/", headers=headers)
        if "port is not open" not in answer.text:
            break
        await asyncio.sleep(0.1)
    assert answer.status_code == 502
    assert "broke off" in answer.json()["message"]
    await assert_responsive(api)


async def test_proc_sys_and_sysrq_cannot_be_opened_for_writing(sandbox: AsyncSandbox) -> None:
    """An E2B client's code is sandboxed code too: every file under /proc/sys and
    /proc/sysrq-trigger opened O_WRONLY (nothing written) is refused, and its root is an
    unprivileged host uid (hardening finding 1)."""
    probe = OPEN_PROC_FOR_WRITING.replace('"', '\\"')
    result = await sandbox.commands.run(f'python3 -c "{probe}"', user="root")  # the strongest
    refused, *opened = result.stdout.splitlines()
    assert int(refused) > 500, result.stdout + result.stderr
    assert opened == [], f"writable from an E2B sandbox: {opened[:20]}"
    maps = await sandbox.commands.run("cat /proc/self/uid_map")
    inside, host_start, count = maps.stdout.split()
    assert inside == "0" and int(host_start) >= idmap.FIRST and count == str(idmap.SIZE)


async def test_the_e2b_user_cannot_become_root(sandbox: AsyncSandbox) -> None:
    """E2B's `user` (commands' default) holds no capability and has no way up: setpriv
    refuses, a set-uid copy of bash made by the sandbox's root gives nothing (no_new_privs),
    and the sandbox's root processes (its init, the guest) are not its to signal."""
    await sandbox.commands.run(
        "cp /bin/bash /opt/rootbash && chmod 4755 /opt/rootbash", user="root"
    )
    result = await sandbox.commands.run(
        "grep CapEff /proc/self/status; id -u; /opt/rootbash -p -c 'id -u'; "
        "setpriv --reuid=0 true 2>/dev/null && echo became-root; "
        "kill -0 1 2>/dev/null && echo signalled-init; "
        "cat /proc/1/environ >/dev/null 2>&1 && echo read-init; true"
    )
    caps, uid, through_setuid, *rest = result.stdout.splitlines()
    assert caps.split() == ["CapEff:", "0000000000000000"]
    assert uid != "0" and through_setuid == uid
    assert rest == [], rest
