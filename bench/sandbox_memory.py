"""Memory of an idle sandbox: every process of it (bwrap, its init, the agent), after boot.

    .venv/bin/python bench/sandbox_memory.py [--count 5]

RSS counts shared pages (libc, the Python binary) in full for each process; PSS splits
them among the processes sharing them, so it is what one more sandbox really costs.
Baseline: one idle `python3 -S` process. Budget: <= 15 MB RSS (all its processes).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from sandbox_common import PRODUCTION_LIMITS, report

from burrow.sandbox.local import LocalBackend


def kib(pid: int, field: str, name: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_pss_mb(pids: list[int]) -> tuple[float, float]:
    rss = sum(kib(pid, "VmRSS", "status") for pid in pids)
    pss = sum(kib(pid, "Pss", "smaps_rollup") for pid in pids)
    return rss / 1024, pss / 1024


async def baseline_mb() -> float:
    process = await asyncio.create_subprocess_exec(
        "/usr/bin/python3", "-E", "-S", "-c", "import time; time.sleep(30)"
    )
    await asyncio.sleep(0.3)
    rss, _ = rss_pss_mb([process.pid])
    process.kill()
    await process.wait()
    return rss


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=5)
    count = parser.parse_args().count
    baseline = await baseline_mb()
    with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
        backend = LocalBackend(Path(data_dir), limits=PRODUCTION_LIMITS)
        try:
            sandboxes = [await backend.create(f"idle-{i}") for i in range(count)]
            for sandbox in sandboxes:
                await sandbox.ping()  # the agent has served a request, then idles
            await asyncio.sleep(0.5)
            rss, pss = [], []
            for sandbox in sandboxes:
                assert sandbox.cgroup is not None
                one_rss, one_pss = rss_pss_mb(sandbox.cgroup.pids())
                rss.append(one_rss)
                pss.append(one_pss)
        finally:
            await backend.close()
    report(
        f"idle sandbox RSS, all processes (PSS {statistics.median(pss):.1f} MB, n={count})",
        statistics.median(rss), "MB", "one idle python3 -S", baseline, "<= 15 MB RSS",
    )  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
