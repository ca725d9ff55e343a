"""A server process's memory as an attack test states it: resident size now, and the peak
since a mark. The peak is the kernel's own high-water mark (VmHWM), reset at the mark
through /proc/PID/clear_refs, so a spike between two samples is not missed."""

from __future__ import annotations

from pathlib import Path

MIB = 1024 * 1024


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def rss_bytes(pid: int) -> int:
    """Resident memory now."""
    return _status_kib(pid, "VmRSS") * 1024


class PeakRss:
    """Memory growth of `pid` from a mark: `mark()` resets the kernel's peak to the current
    resident size; `growth()` is the peak since then minus the size at the mark."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.at_mark = 0

    def mark(self) -> int:
        # "5" resets the peak resident size (Linux >= 4.0); the process is our own child.
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        self.at_mark = rss_bytes(self.pid)
        return self.at_mark

    def peak(self) -> int:
        return max(_status_kib(self.pid, "VmHWM") * 1024, self.at_mark)

    def growth(self) -> int:
        return self.peak() - self.at_mark

    def describe(self) -> str:
        return (
            f"rss {self.at_mark / MIB:.0f} -> peak {self.peak() / MIB:.0f} MiB "
            f"(growth {self.growth() / MIB:.1f} MiB)"
        )
