"""Wake a hibernated sandbox (files only): SandboxPool.get after hibernate, vs a cold create.

    .venv/bin/python bench/sandbox_wake.py [--count 20]

Runs the real pool (journal on SQLite, production limits): each round hibernates the
sandbox (processes stop, files stay) and times the next `get`, which boots it again,
reads `.burrow/services.json` and journals starting/ready. Budget: p50 <= 200 ms.
Baseline: bwrap with the sandbox's namespaces starting `python3 -S -c pass`, the least a
boot of a Python agent can cost (a bare `bwrap true` would flatter the ratio), one sample
right before each wake, so a busy neighbour falls on both alike (`make bench-check` runs
this with `--network none`).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from sandbox_common import PRODUCTION_LIMITS, bwrap_python_ms, p50, p90, report

from burrow.runs.journal.journal import Journal
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.sandbox.backend import NetworkPolicy
from burrow.sandbox.bwrap import find_bwrap
from burrow.sandbox.local import LocalBackend
from burrow.sandbox.network import egress_unavailable
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.events import EventStore
from burrow.store.migrate import open_database


async def wake_ms(
    data_dir: Path, count: int, baseline: list[float], network: NetworkPolicy = "none"
) -> tuple[list[float], float]:
    """`count` wakes, each right after a baseline sample (appended to `baseline`)."""
    bwrap = find_bwrap()
    db = await open_database(f"sqlite+aiosqlite:///{data_dir / 'bench.db'}")
    conversations = ConversationStore(db)
    owner = await AccountStore(db).get_or_create("bench", is_admin=True)
    conversation = await conversations.create(owner.id, "wake bench")
    cid = conversation.id
    backend = LocalBackend(data_dir, limits=PRODUCTION_LIMITS, network=network)
    pool = SandboxPool(backend, Journal(EventStore(db)), idle_seconds=None)
    samples = []
    try:
        started = time.perf_counter()
        sandbox = await pool.get(cid)
        first = (time.perf_counter() - started) * 1000
        for index in range(50):
            await sandbox.write_file(f"src/file{index}.txt", b"x" * 4096)
        for _ in range(count):
            assert await pool.hibernate(cid)
            baseline.append(await bwrap_python_ms(bwrap))
            started = time.perf_counter()
            sandbox = await pool.get(cid)
            samples.append((time.perf_counter() - started) * 1000)
            assert await sandbox.read_file("src/file49.txt") == b"x" * 4096
    finally:
        await pool.close()
        await db.close()
    return samples, first


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--network", choices=["none", "egress"], nargs="*")
    args = parser.parse_args()
    # DESIGN.md section 8: figures for both policies (the unnamed one is `none`, as before).
    policies: list[tuple[NetworkPolicy, str]] = [("none", ""), ("egress", ", network egress")]
    for network, named in policies:
        if args.network and network not in args.network:
            continue
        if network == "egress" and egress_unavailable():
            print(f"skipped wake with egress: {egress_unavailable()}")
            continue
        baseline: list[float] = []
        with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
            samples, first = await wake_ms(Path(data_dir), args.count, baseline, network)
        report(
            f"wake hibernated -> ready{named} (p50; p90 {p90(samples):.1f} ms, first create "
            f"{first:.1f} ms, n={args.count})",
            p50(samples), "ms", "bwrap, same namespaces, python3 -S -c pass, p50",
            p50(baseline), "p50 <= 200 ms",
        )  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
