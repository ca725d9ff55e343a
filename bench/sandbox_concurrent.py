"""20 sandboxes created at once (production limits): wall time and how many came up.

    .venv/bin/python bench/sandbox_concurrent.py [--count 20]

Baseline: the same number of bwraps with the sandbox's namespaces, each starting
`python3 -S -c pass`, started at once (a Python agent cannot boot for less). On 2 cores
the boots share the CPU, so the figure to watch is the wall time per sandbox and zero
failures (one create that fails or does not answer fails the bench, and `make
bench-check`). Rounds alternate (a burst of bwraps, then a burst of creates; medians of the
rounds), so a busy neighbour falls on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from sandbox_common import PRODUCTION_LIMITS, bwrap_python_ms, p50, report

from burrow.sandbox.bwrap import find_bwrap
from burrow.sandbox.local import LocalBackend


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    count = args.count
    bwrap = find_bwrap()
    baselines, walls, alive, failures = [], [], 0, []
    with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
        backend = LocalBackend(Path(data_dir), limits=PRODUCTION_LIMITS)
        try:
            await backend.create("warm-up")
            for round_ in range(args.rounds):
                started = time.perf_counter()
                await asyncio.gather(*(bwrap_python_ms(bwrap) for _ in range(count)))
                baselines.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                results = await asyncio.gather(
                    *(backend.create(f"c-{round_}-{i}") for i in range(count)),
                    return_exceptions=True,
                )
                walls.append((time.perf_counter() - started) * 1000)
                ready = [r for r in results if not isinstance(r, BaseException)]
                alive += sum([await s.ping() > 0 for s in ready])
                failures += [str(r) for r in results if isinstance(r, BaseException)]
                for sandbox in ready:  # the next round starts from the same machine
                    await backend.destroy(sandbox.id)
        finally:
            await backend.close()
    wall, total = p50(walls), count * args.rounds
    report(
        f"{count} concurrent creates, wall time ({alive}/{total} ready and answering over "
        f"{args.rounds} rounds, {wall / count:.1f} ms per sandbox, p50 of rounds)",
        wall, "ms", f"{count} concurrent bwrap python3 -S -c pass, same namespaces, p50",
        p50(baselines), "all succeed",
    )  # fmt: skip
    for failure in failures[:3]:
        print("  failed:", failure)
    if alive < total:  # the target is that all succeed: a failed create fails the bench
        raise SystemExit(f"{total - alive} of {total} concurrent creates failed or did not answer")


if __name__ == "__main__":
    asyncio.run(main())
