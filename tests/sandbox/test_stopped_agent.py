"""Finding 3 through a real `burrow serve`: a terminal stops its sandbox's guest
(`sleep 1000 &`, then `kill -STOP 2`). Hibernation, restart, delete and SIGTERM must each
finish within a deadline, leave no process of that sandbox alive (counted from the host,
by pid namespace), and the server must answer as fast as when idle meanwhile, its memory
growth bounded."""

from __future__ import annotations

import asyncio
import secrets
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.api.harness import ADMIN_PASSWORD, log_in, serve_process
from tests.process_memory import MIB, PeakRss
from tests.sandbox.harness import guest_of, host_pids, namespace_members, wait_for_state

IDLE = 3.0  # seconds before an idle sandbox hibernates
AGENT_TIMEOUT = 2.0
DEADLINE = 20.0  # for each of hibernation, restart, delete, shutdown; on main: forever
HEALTH_SAMPLES = 30
# Three frozen sandboxes, each hibernated, restarted or deleted: the server holds nothing
# per frozen guest but a connection and a task, so its peak grows by what first use of
# terminals and sandboxes loads, not by the attack.
RSS_GROWTH_BOUND = 32 * MIB  # measured: about 1 MiB


@pytest.fixture
def server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    monkeypatch.setenv("BURROW_SANDBOX_IDLE_HIBERNATE_SECONDS", str(IDLE))
    monkeypatch.setenv("BURROW_SANDBOX_AGENT_TIMEOUT", str(AGENT_TIMEOUT))
    # Production's cgroups, smaller; no workspace image, which only slows each boot.
    monkeypatch.setenv("BURROW_SANDBOX_MEMORY_MB", "256")
    monkeypatch.setenv("BURROW_SANDBOX_TMP_MB", "32")
    monkeypatch.setenv("BURROW_SANDBOX_DISK_MB", "0")
    with serve_process(tmp_path / "data", "demo") as running:
        yield running


async def freeze_guest(client: httpx.AsyncClient, cid: str) -> str:
    """In a terminal of the conversation's sandbox: `sleep 1000.N &` then `kill -STOP 2`.
    Returns the sandbox's pid namespace once its guest is seen stopped from the host."""
    opened = await client.post(f"/api/conversations/{cid}/terminals", json={"cols": 80, "rows": 24})
    assert opened.status_code == 201, opened.text
    tid = opened.json()["terminal_id"]
    ws_base = str(client.base_url).replace("http", "ws", 1)
    url = f"{ws_base}/api/conversations/{cid}/terminals/{tid}/ws"
    duration = f"1000.{secrets.randbelow(10**6):06d}"  # tells this sleep from any other
    marker = b"sleep\0" + duration.encode()
    cookie = {"Cookie": f"burrow_session={client.cookies['burrow_session']}"}
    async with connect(url, additional_headers=cookie) as terminal:
        await terminal.send(f"sleep {duration} &\n".encode())
        async with asyncio.timeout(10):
            while not host_pids(marker):  # noqa: ASYNC110 (polling the host's /proc)
                await asyncio.sleep(0.05)
        namespace, guest = guest_of(marker)
        await terminal.send(b"kill -STOP 2\n")
        await wait_for_state(guest, "T")
    assert len(namespace_members(namespace)) >= 4  # init, guest, shell, sleep
    return namespace


async def assert_all_gone(namespace: str, within: float = 5.0) -> None:
    """Every process of the sandbox is dead (the kernel reaps them asynchronously)."""
    for _ in range(int(within / 0.05)):
        if not namespace_members(namespace):
            return
        await asyncio.sleep(0.05)
    survivors = namespace_members(namespace)
    assert not survivors, f"{len(survivors)} processes of the sandbox survived: {survivors}"


class HealthProbe:
    """GET /api/health in a loop on its own thread, so that the test's own work (scanning
    /proc, driving the attack) never delays a measurement; only the server's answer does."""

    def __init__(self, base: str) -> None:
        self._base = base
        self._stop = threading.Event()
        self._latencies: list[float] = []
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._latencies = []
        self._thread = threading.Thread(target=self._probe, daemon=True)
        self._thread.start()

    def finish(self) -> list[float]:
        """The latencies seen since `start`."""
        assert self._thread is not None
        self._stop.set()
        self._thread.join()
        return self._latencies

    def _probe(self) -> None:
        with httpx.Client(base_url=self._base, timeout=DEADLINE) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                assert client.get("/api/health").status_code == 200
                self._latencies.append(time.perf_counter() - started)
                self._stop.wait(0.02)


async def sandbox_status(client: httpx.AsyncClient, cid: str) -> str:
    response = await client.get(f"/api/conversations/{cid}/sandbox")
    assert response.status_code == 200, response.text
    status: str = response.json()["status"]
    return status


async def new_conversation(client: httpx.AsyncClient) -> str:
    response = await client.post("/api/conversations", json={"title": "frozen guest"})
    assert response.status_code == 201, response.text
    cid: str = response.json()["id"]
    return cid


async def test_a_sandbox_that_stops_its_agent_is_still_stoppable(
    server: tuple[subprocess.Popen[bytes], str],
) -> None:
    process, base = server
    async with (
        httpx.AsyncClient(base_url=base, timeout=DEADLINE) as client,
    ):
        await log_in(client, "admin", ADMIN_PASSWORD)
        probe = HealthProbe(base)
        probe.start()
        await asyncio.sleep(3.0)  # the server idle: the baseline
        idle = probe.finish()
        memory = PeakRss(process.pid)
        memory.mark()
        probe.start()

        # Hibernation: the idle timer asks the frozen guest whether it is busy.
        cid = await new_conversation(client)
        namespace = await freeze_guest(client, cid)
        took = {"frozen -> hibernated": time.monotonic()}
        async with asyncio.timeout(IDLE + DEADLINE):
            while await sandbox_status(client, cid) != "hibernated":  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        took["frozen -> hibernated"] = time.monotonic() - took["frozen -> hibernated"]
        await assert_all_gone(namespace)

        # Restart and delete, each while hibernation is under way.
        cid = await new_conversation(client)
        namespace = await freeze_guest(client, cid)
        await asyncio.sleep(IDLE + 0.5)
        started = time.monotonic()
        restarted = await client.post(f"/api/conversations/{cid}/sandbox/restart", json={})
        took["restart"] = time.monotonic() - started
        assert restarted.status_code == 202, restarted.text
        assert restarted.json()["status"] == "ready"
        await assert_all_gone(namespace)

        namespace = await freeze_guest(client, cid)
        await asyncio.sleep(IDLE + 0.5)
        started = time.monotonic()
        deleted = await client.delete(f"/api/conversations/{cid}")
        took["delete"] = time.monotonic() - started
        assert deleted.status_code == 204, deleted.text
        await assert_all_gone(namespace)

        during = probe.finish()
        assert len(idle) >= HEALTH_SAMPLES and len(during) >= HEALTH_SAMPLES
        idle_p50, during_p50 = statistics.median(idle), statistics.median(during)
        print(
            f"health p50 idle {idle_p50 * 1e3:.2f} ms, during the attacks {during_p50 * 1e3:.2f}"
            f" ms (x{during_p50 / idle_p50:.2f}); server {memory.describe()}"
        )
        assert during_p50 <= 5 * idle_p50, (idle_p50, during_p50)
        assert memory.growth() <= RSS_GROWTH_BOUND, memory.describe()

        # SIGTERM with a request to the frozen guest in flight.
        cid = await new_conversation(client)
        namespace = await freeze_guest(client, cid)
        await asyncio.sleep(IDLE + 0.5)
        listing = asyncio.create_task(client.get(f"/api/conversations/{cid}/files"))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail(f"burrow serve did not stop within {DEADLINE:g} s of SIGTERM")
        took["SIGTERM -> exit"] = time.monotonic() - started
        print(", ".join(f"{what} {seconds:.2f} s" for what, seconds in took.items()))
        await asyncio.wait({listing}, timeout=5)
        assert listing.done()  # answered (503) or cut by the shutdown, never left hanging
        listing.exception()
        await assert_all_gone(namespace)
