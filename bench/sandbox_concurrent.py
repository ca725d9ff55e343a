"""20 sandboxes created at once (production limits): wall time and how many came up.

    .venv/bin/python bench/sandbox_concurrent.py [--count 20]

Baseline: the same number of bwraps with the sandbox's namespaces, each starting
`python3 -S -c pass`, started at once (a Python agent cannot boot for less). On 2 cores
the boots share the CPU, so the figure to watch is the wall time per sandbox and zero
failures.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from sandbox_common import PRODUCTION_LIMITS, bwrap_python_ms, report

from burrow.sandbox.bwrap import find_bwrap
from burrow.sandbox.local import LocalBackend


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=20)
    count = parser.parse_args().count
    bwrap = find_bwrap()
    started = time.perf_counter()
    await asyncio.gather(*(bwrap_python_ms(bwrap) for _ in range(count)))
    baseline = (time.perf_counter() - started) * 1000
    with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
        backend = LocalBackend(Path(data_dir), limits=PRODUCTION_LIMITS)
        try:
            await backend.create("warm-up")
            started = time.perf_counter()
            results = await asyncio.gather(
                *(backend.create(f"c-{i}") for i in range(count)), return_exceptions=True
            )
            wall = (time.perf_counter() - started) * 1000
            ready = [r for r in results if not isinstance(r, BaseException)]
            alive = sum([await s.ping() > 0 for s in ready])
        finally:
            await backend.close()
    failures = [str(r) for r in results if isinstance(r, BaseException)]
    report(
        f"{count} concurrent creates, wall time ({alive}/{count} ready and answering, "
        f"{wall / count:.1f} ms per sandbox)",
        wall, "ms", f"{count} concurrent bwrap python3 -S -c pass, same namespaces",
        baseline, "all succeed",
    )  # fmt: skip
    for failure in failures[:3]:
        print("  failed:", failure)


if __name__ == "__main__":
    asyncio.run(main())
