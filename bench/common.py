"""Shared bits of the benchmarks: percentiles and a uniform report line."""

from __future__ import annotations

import socket
import statistics


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def report(
    name: str, value: float, unit: str, baseline_name: str, baseline: float, target: str
) -> None:
    """One figure, its baseline from the same run, and their ratio."""
    ratio = value / baseline if baseline else float("inf")
    print(
        f"{name}: {value:.3f} {unit} | baseline {baseline_name}: {baseline:.3f} {unit} "
        f"| ratio {ratio:.2f}x | target {target}",
        flush=True,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
