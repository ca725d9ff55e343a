"""The phases of `burrow serve`'s start, as wall and CPU milliseconds: printed by
`burrow serve --timings`, and logged at debug level either way.

The clock starts when the process did (Linux's /proc/self/stat), so the first phase holds
the interpreter's start and the CLI's imports as well. CPU time beside wall time
tells a slow phase from a busy machine.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Phase:
    name: str
    wall_ms: float
    cpu_ms: float


def process_started() -> float:
    """When this process started, on the CLOCK_BOOTTIME clock (to 1/CLK_TCK s); now, where
    /proc cannot say."""
    now = time.clock_gettime(time.CLOCK_BOOTTIME)
    try:
        stat = Path("/proc/self/stat").read_text()
    except OSError:
        return now
    # The second field, the command, may hold spaces and parentheses: count after its end.
    start_ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
    return min(now, start_ticks / os.sysconf("SC_CLK_TCK"))


class StartClock:
    """`mark(name)` ends the phase `name` at this moment; `phases` are those ended so far."""

    def __init__(self) -> None:
        self.phases: list[Phase] = []
        self._wall = process_started()
        self._cpu = 0.0  # process_time counts from the process's start too

    def mark(self, name: str) -> None:
        wall, cpu = time.clock_gettime(time.CLOCK_BOOTTIME), time.process_time()
        phase = Phase(name, (wall - self._wall) * 1000, (cpu - self._cpu) * 1000)
        self.phases.append(phase)
        self._wall, self._cpu = wall, cpu

    def report(self, out: TextIO | None = None) -> None:
        """A debug log line per phase (all at the end: the first ones end before logging is
        configured), and the table on `out` if given."""
        for p in self.phases:
            log.debug("start: %s in %.1f ms (%.1f ms CPU)", p.name, p.wall_ms, p.cpu_ms)
        if out is not None:
            self._print(out)

    def _print(self, out: TextIO) -> None:
        width = max((len(p.name) for p in self.phases), default=0)
        lines = ["burrow serve start, ms wall / CPU:"]
        lines += [f"  {p.name:<{width}}  {p.wall_ms:7.1f} / {p.cpu_ms:7.1f}" for p in self.phases]
        wall, cpu = sum(p.wall_ms for p in self.phases), sum(p.cpu_ms for p in self.phases)
        lines.append(f"  {'total':<{width}}  {wall:7.1f} / {cpu:7.1f}")
        out.write("\n".join(lines) + "\n")
        out.flush()
