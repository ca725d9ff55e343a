"""`burrow serve` start -> healthy (DESIGN.md §7: <= 1.5 s).

Baseline, in the same run: starting the same Python interpreter with `-c pass`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import free_port, p50, report

RUNS = 5


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def start_to_healthy(data_dir: Path) -> float:
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/health"
    begin = time.perf_counter()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "burrow.cli",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
            "--model",
            "demo",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not healthy(url):
            if server.poll() is not None:
                raise RuntimeError("burrow serve exited")
            time.sleep(0.005)
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
