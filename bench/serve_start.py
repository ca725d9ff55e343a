"""`burrow serve` start -> healthy, and its idle memory (DESIGN.md §7: start <= 0.5 s on a
migrated data dir, <= 0.8 s on a new one; idle server <= 80 MB RSS).

Baselines, in the same run: starting the same Python interpreter with `-c pass`; the RSS
of that interpreter idling (`time.sleep`), the floor any Python server stands on.

    .venv/bin/python bench/serve_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, report, spawn_serve, wait_healthy

IDLE_SECONDS = 1.0  # after healthy: start-up work done in the background has settled


def start_to_healthy(data_dir: Path, rss: list[float] | None = None) -> float:
    begin = time.perf_counter()
    server, base = spawn_serve(data_dir, "demo", quiet=True)
    try:
        wait_healthy(server, base)
        took = time.perf_counter() - begin
        if rss is not None:
            time.sleep(IDLE_SECONDS)
            rss.append(rss_mb(server.pid))
        return took
    finally:
        server.terminate()
        server.wait(10)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def bare_python() -> float:
    begin = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - begin


def bare_python_rss() -> float:
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(IDLE_SECONDS / 2)
        return rss_mb(idle.pid)
    finally:
        idle.kill()
        idle.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    base = p50([bare_python() for _ in range(runs)])
    rss: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        new = start_to_healthy(Path(tmp))  # creates and migrates the database
        # Later starts open it, as a restart does.
        times = [start_to_healthy(Path(tmp), rss) for _ in range(runs)]
    bare = "python -c pass"
    report("burrow serve start -> healthy p50", p50(times), "s", bare, base, "<= 0.5 s")
    report("burrow serve start -> healthy, new data dir", new, "s", bare, base, "<= 0.8 s")
    report(
        f"burrow serve idle RSS (p50, n={runs})",
        p50(rss), "MB", "idle python3 RSS", bare_python_rss(), "<= 80 MB",
    )  # fmt: skip


if __name__ == "__main__":
    main()
