"""`burrow serve` start -> healthy (DESIGN.md §7: <= 1.5 s).

Baseline, in the same run: starting the same Python interpreter with `-c pass`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, report, spawn_serve, wait_healthy

RUNS = 5


def start_to_healthy(data_dir: Path) -> float:
    begin = time.perf_counter()
    server, base = spawn_serve(data_dir, "demo", quiet=True)
    try:
        wait_healthy(server, base)
        return time.perf_counter() - begin
    finally:
        server.terminate()
        server.wait(10)


def bare_python() -> float:
    begin = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - begin


def main() -> None:
    base = p50([bare_python() for _ in range(RUNS)])
    with tempfile.TemporaryDirectory() as tmp:
        # The first start creates the database; later ones open it, as a restart does.
        times = [start_to_healthy(Path(tmp)) for _ in range(RUNS)]
    report("burrow serve start -> healthy p50", p50(times), "s", "python -c pass", base, "<= 1.5 s")


if __name__ == "__main__":
    main()
