"""Environments through a real server and real sandboxes: defined by an administrator,
built once in a sandbox of their own, kept across a restart, and the system every new
conversation on them starts from; a failing build says why, a build can be cancelled,
and nobody but an administrator defines one."""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, running_server
from tests.api.test_checkpoints import shell

SETUP = (
    "printf '#!/bin/sh\\necho from-the-environment\\n' > /usr/local/bin/envtool\n"
    "chmod +x /usr/local/bin/envtool\n"
    'echo "$GREETING" > /etc/greeting\n'
    "useradd -m builder\n"
    "echo changed-by-setup >> /etc/passwd\n"
)


def server(tmp_path: Path) -> Any:
    return running_server(tmp_path, lambda: ScriptedProvider([]))


async def define(srv: RunningServer, **body: Any) -> httpx.Response:
    return await srv.client.post("/api/environments", json=body)


async def until_built(srv: RunningServer, name: str, within: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        got = (await srv.client.get(f"/api/environments/{name}")).json()
        if got["status"] != "building":
            return dict(got)
        assert time.monotonic() < deadline, got
        await asyncio.sleep(0.2)


async def conversation_on(srv: RunningServer, environment: str) -> httpx.Response:
    return await srv.client.post(
        "/api/conversations", json={"title": "on env", "environment": environment}
    )


async def test_an_environment_is_built_once_and_every_new_conversation_starts_from_it(
    tmp_path: Path,
) -> None:
    passwd = await asyncio.to_thread(Path("/etc/passwd").read_bytes)
    async with server(tmp_path) as srv:
        made = await define(srv, name="tools", setup=SETUP, env={"GREETING": "hello"})
        assert made.status_code == 201, made.text
        assert made.json()["status"] == "building"
        built = await until_built(srv, "tools")
        assert built["status"] == "ready", built
        assert "[burrow] setup script" in built["log_tail"]
        first = await conversation_on(srv, "tools")
        assert first.status_code == 201, first.text
        assert first.json()["environment"] == "tools"
        cid = first.json()["id"]
        # Its variables reach every command, and login shells (terminals) too.
        check = 'envtool; cat /etc/greeting; id -un builder; echo "$GREETING"'
        assert await shell(srv, cid, check) == "from-the-environment\nhello\nbuilder\nhello\n"
        assert await shell(srv, cid, "bash --login -c 'echo $GREETING'") == "hello\n"
        state = (await srv.client.get(f"/api/conversations/{cid}/sandbox")).json()
        assert state["environment"] == "tools"
        assert [layer["name"] for layer in state["layers"]] == [
            "host",
            "environment tools",
            "conversation",
        ]
        # Each conversation's changes are its own; the environment stays as built.
        await shell(srv, cid, "rm /usr/local/bin/envtool && echo mine > /etc/greeting")
        second = (await conversation_on(srv, "tools")).json()["id"]
        assert await shell(srv, second, check) == "from-the-environment\nhello\nbuilder\nhello\n"
        plain = await srv.create_conversation()
        assert "No such" in await shell(srv, plain, "ls /usr/local/bin/envtool 2>&1 || true")
    assert await asyncio.to_thread(Path("/etc/passwd").read_bytes) == passwd  # setup: inside

    async with server(tmp_path) as srv:  # a restart: found built, not built again
        got = (await srv.client.get("/api/environments/tools")).json()
        assert (got["status"], got["detail"]) == ("ready", "built")
        third = (await conversation_on(srv, "tools")).json()["id"]
        assert await shell(srv, third, "envtool") == "from-the-environment\n"


async def test_packages_come_from_the_host_s_apt_sources(tmp_path: Path) -> None:
    async with server(tmp_path) as srv:
        made = await define(srv, name="cache", packages=["memcached"])
        assert made.status_code == 201, made.text
        built = await until_built(srv, "cache")
        assert built["status"] == "ready", built["detail"]
        cid = (await conversation_on(srv, "cache")).json()["id"]
        assert "memcached" in await shell(srv, cid, "ls /usr/bin/memcached; id -un memcache")


async def test_a_failing_build_says_its_exit_and_output_and_its_conversations_say_so(
    tmp_path: Path,
) -> None:
    async with server(tmp_path) as srv:
        await define(srv, name="broken", setup="echo the-step-that-broke\nexit 3\n")
        built = await until_built(srv, "broken")
        assert built["status"] == "failed"
        assert "exited with 3" in built["detail"] and "the-step-that-broke" in built["detail"]
        cid = (await conversation_on(srv, "broken")).json()["id"]
        files = await srv.client.get(f"/api/conversations/{cid}/files", params={"path": "."})
        assert files.status_code >= 400
        state = (await srv.client.get(f"/api/conversations/{cid}/sandbox")).json()
        assert state["status"] == "failed" and "exited with 3" in state["detail"]
        # Fixed by its administrator: built again, and the restarted sandbox starts on it.
        fixed = await srv.client.patch("/api/environments/broken", json={"setup": "true\n"})
        assert fixed.status_code == 200 and fixed.json()["status"] == "building"
        assert (await until_built(srv, "broken"))["status"] == "ready"
        restart = await srv.client.post(f"/api/conversations/{cid}/sandbox/restart", json={})
        assert restart.status_code == 202 and restart.json()["status"] == "ready", restart.text


async def test_a_waiting_conversation_sees_the_build_go_and_it_can_be_cancelled(
    tmp_path: Path,
) -> None:
    slow = "for i in $(seq 1 300); do echo step $i; sleep 0.1; done\n"
    async with server(tmp_path) as srv:
        await define(srv, name="slow", setup=slow)
        cid = (await conversation_on(srv, "slow")).json()["id"]
        waiting = asyncio.create_task(
            srv.client.get(f"/api/conversations/{cid}/files", params={"path": "."})
        )
        builds: list[dict[str, Any]] = []
        async with asyncio.timeout(60):
            while len([b for b in builds if b["stage"] == "progress"]) < 2:
                await asyncio.sleep(0.5)
                events = await srv.events(cid)
                builds = [e["data"] for e in events if e["type"] == "environment.build"]
        assert builds[0] == {
            "name": "slow",
            "stage": "started",
            "detail": "Building the environment slow",
        }
        assert any(b["detail"].startswith("step ") for b in builds[1:])
        cancelled = await srv.client.post("/api/environments/slow/cancel", json={})
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        assert (await waiting).status_code >= 400
        events = await srv.events(cid)
        last = [e["data"] for e in events if e["type"] == "environment.build"][-1]
        assert last["stage"] == "failed" and "cancelled" in last["detail"]
        again = await srv.client.post("/api/environments/slow/cancel", json={})
        assert again.status_code == 409 and again.json()["error"]["code"] == "not_building"


async def test_only_administrators_define_them_and_bad_definitions_are_refused(
    tmp_path: Path,
) -> None:
    async with server(tmp_path) as srv:
        bad = {
            "invalid_environment_name": {"name": "Bad Name!"},
            "base_not_supported": {"name": "deb", "base": "ubuntu:jammy"},
            "invalid_packages": {"name": "pkgs", "packages": ["git; rm -rf /"]},
            "invalid_env": {"name": "vars", "env": {"1BAD": "x"}},
            "invalid_setup": {"name": "big", "setup": "x" * (70 << 10)},
            "invalid_environment": {"name": "extra", "dockerfile": "FROM x"},
        }
        for code, body in bad.items():
            refused = await srv.client.post("/api/environments", json=body)
            assert refused.status_code == 422, (code, refused.text)
            assert refused.json()["error"]["code"] == code
        # A Debian base names a suite, and nothing else: no path, no option, no other type.
        for base in ("debian:", "debian:Bookworm", "debian:../../etc", "debian:-x", 7, None):
            refused = await define(srv, name="deb", base=base)
            assert refused.status_code == 422, (base, refused.text)
            assert refused.json()["error"]["code"] == "base_not_supported"
            assert "debian:<suite>" in refused.json()["error"]["message"]
        unknown = await conversation_on(srv, "nowhere")
        assert unknown.status_code == 422
        assert unknown.json()["error"]["code"] == "environment_not_found"
        assert (await define(srv, name="ok", setup="true")).status_code == 201
        again = await define(srv, name="ok", setup="true")
        assert again.status_code == 409

        created = await srv.client.post(
            "/api/users", json={"username": "bob", "password": "bob-password-123"}
        )
        assert created.status_code == 201, created.text
        async with httpx.AsyncClient(base_url=srv.base_url) as bob:
            login = {"username": "bob", "password": "bob-password-123"}
            assert (await bob.post("/api/auth/login", json=login)).status_code == 200
            assert (await bob.get("/api/environments")).status_code == 200
            for method, path in (
                ("POST", "/api/environments"),
                ("PATCH", "/api/environments/ok"),
                ("DELETE", "/api/environments/ok"),
                ("POST", "/api/environments/ok/cancel"),
            ):
                body = {"name": "mine", "setup": "true"} if method != "DELETE" else None
                response = await bob.request(method, path, json=body)
                assert response.status_code == 403, (method, path, response.text)
        assert (await srv.client.delete("/api/environments/ok")).status_code == 204
        assert (await srv.client.get("/api/environments/ok")).status_code == 404


async def test_an_old_build_stays_while_a_conversation_stands_on_it_then_goes(
    tmp_path: Path,
) -> None:
    builds = tmp_path / "environments"
    async with server(tmp_path) as srv:
        await define(srv, name="gc", setup="echo one > /etc/v")
        assert (await until_built(srv, "gc"))["status"] == "ready"
        first = (await conversation_on(srv, "gc")).json()["id"]
        assert await shell(srv, first, "cat /etc/v") == "one\n"
        changed = await srv.client.patch(
            "/api/environments/gc", json={"setup": "echo two > /etc/v"}
        )
        assert changed.status_code == 200, changed.text
        assert (await until_built(srv, "gc"))["status"] == "ready"
        assert len(list(builds.iterdir())) == 2  # the old one: the first conversation's
        second = (await conversation_on(srv, "gc")).json()["id"]
        assert await shell(srv, second, "cat /etc/v") == "two\n"
        restarted = await srv.client.post(f"/api/conversations/{first}/sandbox/restart", json={})
        assert restarted.json()["status"] == "ready"
        assert await shell(srv, first, "cat /etc/v") == "one\n"  # it stays on its build
        assert (await srv.client.delete(f"/api/conversations/{first}")).status_code == 204
        assert (await srv.client.delete("/api/environments/gc")).status_code == 204
        assert len(list(builds.iterdir())) == 1  # the second conversation's stays
        assert await shell(srv, second, "cat /etc/v") == "two\n"


async def test_an_environment_on_a_debian_base_builds_it_once_and_runs_its_conversations_on_it(
    tmp_path: Path,
) -> None:
    """A real mmdebstrap build (~25 s here): streamed, then shared by every environment
    on the same suite and packages, and never built again while unchanged."""
    setup = "echo from-setup > /etc/setup-mark\n"
    async with server(tmp_path) as srv:
        made = await define(srv, name="deb", base="debian:bookworm", packages=["jq"], setup=setup)
        assert made.status_code == 201, made.text
        assert made.json()["base"] == "debian:bookworm"
        cid = (await conversation_on(srv, "deb")).json()["id"]
        release = await shell(srv, cid, "grep CODENAME /etc/os-release; cat /etc/setup-mark")
        assert release == "VERSION_CODENAME=bookworm\nfrom-setup\n"
        built = await until_built(srv, "deb")
        assert built["status"] == "ready", built["detail"]
        assert "mmdebstrap --mode=unshare" in built["log_tail"]
        assert "I: success" in built["log_tail"]
        # The build told the conversation how it went, at least every 2 s.
        events = [e for e in await srv.events(cid) if e["type"] == "environment.build"]
        stages = [e["data"]["stage"] for e in events]
        assert stages[0] == "started" and stages[-1] == "done" and "progress" in stages
        assert any(e["data"]["detail"].startswith("I: ") for e in events), events  # its output
        times = [datetime.fromisoformat(e["ts"]) for e in events]
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
        assert max(gaps) <= 2.0, gaps
        # Its packages are in the base; the host's own tools are not there.
        assert await shell(srv, cid, "echo '[1,2]' | jq length") == "2\n"
        assert "No such" in await shell(srv, cid, "ls /usr/bin/mmdebstrap 2>&1 || true")
        state = (await srv.client.get(f"/api/conversations/{cid}/sandbox")).json()
        assert state["environment"] == "deb"
        names = [layer["name"] for layer in state["layers"]]
        assert names == ["debian:bookworm", "environment deb", "conversation"], state["layers"]
        assert "Debian bookworm" in state["layers"][0]["detail"]

        # Another environment on the same suite and packages: the base is not built again.
        other = await define(srv, name="deb2", base="debian:bookworm", packages=["jq"])
        assert other.status_code == 201, other.text
        again = await until_built(srv, "deb2")
        assert again["status"] == "ready", again["detail"]
        assert "built already" in again["log_tail"] and "mmdebstrap" not in again["log_tail"]
        bases = [p for p in (tmp_path / "environments").iterdir() if p.name.startswith("debian-")]
        assert len(bases) == 1 and (bases[0] / "rootfs/etc/os-release").is_file()
        # Saved unchanged: nothing is built.
        same = await srv.client.patch("/api/environments/deb", json={"packages": ["jq"]})
        assert (same.json()["status"], same.json()["detail"]) == ("ready", built["detail"])
        second = (await conversation_on(srv, "deb2")).json()["id"]
        assert "No such" in await shell(srv, second, "ls /etc/setup-mark 2>&1 || true")
        assert await shell(srv, second, "jq --version") == "jq-1.6\n"

    async with server(tmp_path) as srv:  # a restart finds both built
        for name in ("deb", "deb2"):
            got = (await srv.client.get(f"/api/environments/{name}")).json()
            assert (got["status"], got["detail"]) == ("ready", "built"), got
        # Deleting the environments leaves the base to the collector only once unused.
        assert (await srv.client.delete("/api/environments/deb")).status_code == 204
        assert bases[0].is_dir()  # deb2 stands on it
        assert (await srv.client.delete(f"/api/conversations/{second}")).status_code == 204
        assert (await srv.client.delete("/api/environments/deb2")).status_code == 204
        assert (await srv.client.delete(f"/api/conversations/{cid}")).status_code == 204
        assert (await srv.client.delete("/api/environments/deb2")).status_code == 404


async def test_a_debian_base_that_cannot_be_built_says_mmdebstrap_s_exit_and_output(
    tmp_path: Path,
) -> None:
    async with server(tmp_path) as srv:
        made = await define(srv, name="nodeb", base="debian:bookworm", packages=["no-such-pkg-x"])
        assert made.status_code == 201, made.text
        built = await until_built(srv, "nodeb")
        assert built["status"] == "failed"
        assert "its Debian base failed: mmdebstrap exited with" in built["detail"]
        assert "no-such-pkg-x" in built["detail"]  # the tail of its output says which
        assert [p.name for p in (tmp_path / "environments").iterdir()] == []
