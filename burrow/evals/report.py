"""An eval run's results as JSON, a readable table, a PNG chart, and a comparison of two."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from statistics import mean, stdev
from typing import Any

from burrow.evals.runner import TaskResult

COLUMNS = ("task", "status", "check", "tokens", "cost $", "wall s", "ttft s", "tool s", "calls")
TRIAL_COLUMNS = ("task", "pass@1", "errored", "tokens", "cached", "cost $", "wall s", "calls")
# Student's t at 97.5 % for 1..10 degrees of freedom; beyond, the normal's 1.96 is within 6 %.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def summary(results: Sequence[TaskResult]) -> dict[str, Any]:
    """Totals over every attempt. `pass_at_1` is the mean of each trial's pass rate over
    the tasks, and `ci95` its 95 % interval across trials (Student's t; None for one
    trial), as Terminal-Bench reports; `errored` attempts count as not passed."""
    count = len(results)
    trials = max((r.trial for r in results), default=0)
    rates = [_rate([r for r in results if r.trial == k]) for k in range(1, trials + 1)]
    pass_at_1 = mean(rates) if rates else 0.0
    return {
        "tasks": len({r.name for r in results}),
        "trials": trials,
        "attempts": count,
        "passed": sum(r.passed for r in results),
        "pass_rate": round(sum(r.passed for r in results) / count, 4) if count else 0.0,
        "pass_at_1": round(pass_at_1, 4),
        "ci95": _interval(rates),
        "errored": sum(r.errored for r in results),
        "met_expectation": sum(r.met_expectation for r in results),
        "tokens": sum(r.tokens for r in results),
        "prompt_tokens": sum(r.prompt_tokens for r in results),
        "cache_read_tokens": sum(r.cache_read_tokens for r in results),
        "cache_write_tokens": sum(r.cache_write_tokens for r in results),
        "completion_tokens": sum(r.completion_tokens for r in results),
        "cost": round(sum(r.cost for r in results), 6),
        "wall_s": round(sum(r.wall_s for r in results), 3),
        "tool_s": round(sum(r.tool_s for r in results), 3),
    }


def as_json(results: Sequence[TaskResult], model: str) -> dict[str, Any]:
    totals = summary(results)
    return {
        "model": model,
        "burrow_version": metadata.version("burrow"),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "trials": totals["trials"],
        "summary": totals,
        "tasks": [r.as_json() for r in results],
    }


def _rate(results: Sequence[TaskResult]) -> float:
    return sum(r.passed for r in results) / len(results) if results else 0.0


def _interval(rates: Sequence[float]) -> list[float] | None:
    if len(rates) < 2:
        return None
    t = T975[len(rates) - 2] if len(rates) - 1 <= len(T975) else 1.96
    half = t * stdev(rates) / math.sqrt(len(rates))
    centre = mean(rates)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def table(results: Sequence[TaskResult]) -> str:
    """One row per attempt; with several trials, one per task over its trials."""
    if any(r.trial > 1 for r in results):
        return _trials_table(results)
    rows = [
        (
            r.name,
            r.status,
            "pass" if r.passed else "FAIL",
            str(r.tokens),
            f"{r.cost:.4f}",
            f"{r.wall_s:.2f}",
            "-" if r.ttft_s is None else f"{r.ttft_s:.2f}",
            f"{r.tool_s:.2f}",
            f"{r.model_calls}/{r.tool_calls}",
        )
        for r in results
    ]
    total = summary(results)
    rows.append(
        (
            "total",
            f"{total['passed']}/{total['attempts']} passed",
            f"{total['pass_rate']:.0%}",
            str(total["tokens"]),
            f"{total['cost']:.4f}",
            f"{total['wall_s']:.2f}",
            "",
            f"{total['tool_s']:.2f}",
            "",
        )
    )
    return _grid([COLUMNS, *rows])


def _trials_table(results: Sequence[TaskResult]) -> str:
    names = list(dict.fromkeys(r.name for r in results))
    rows = []
    for name in names:
        runs = [r for r in results if r.name == name]
        rows.append(
            (
                name,
                f"{sum(r.passed for r in runs)}/{len(runs)}",
                str(sum(r.errored for r in runs)),
                str(sum(r.tokens for r in runs)),
                str(sum(r.cache_read_tokens for r in runs)),
                f"{sum(r.cost for r in runs):.4f}",
                f"{mean(r.wall_s for r in runs):.2f}",
                f"{mean(r.model_calls for r in runs):.1f}/{mean(r.tool_calls for r in runs):.1f}",
            )
        )
    total = summary(results)
    ci = total["ci95"]
    shown = f"{total['pass_at_1']:.0%}" + (f" [{ci[0]:.0%}, {ci[1]:.0%}]" if ci else "")
    rows.append(
        (
            "total",
            shown,
            str(total["errored"]),
            str(total["tokens"]),
            str(total["cache_read_tokens"]),
            f"{total['cost']:.4f}",
            "",
            "",
        )
    )
    return _grid([TRIAL_COLUMNS, *rows])


def compare(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Per task: what changed between two `--json` files (pass/fail first, then figures)."""
    old, new = _by_task(before["tasks"]), _by_task(after["tasks"])
    rows: list[tuple[str, ...]] = [("task", "check", "tokens", "wall s", "tool s")]
    for name in sorted(old.keys() | new.keys()):
        a, b = old.get(name), new.get(name)
        if a is None or b is None:
            rows.append((name, "added" if a is None else "removed", "", "", ""))
            continue
        check = _flip(a["passed"], b["passed"])
        rows.append(
            (
                name,
                check,
                _delta(a["tokens"], b["tokens"], "{:+d}"),
                _delta(a["wall_s"], b["wall_s"], "{:+.2f}"),
                _delta(a["tool_s"], b["tool_s"], "{:+.2f}"),
            )
        )
    s, t = before["summary"], after["summary"]
    rows.append(
        (
            "total",
            f"{s['pass_rate']:.0%} -> {t['pass_rate']:.0%}",
            _delta(s["tokens"], t["tokens"], "{:+d}"),
            _delta(s["wall_s"], t["wall_s"], "{:+.2f}"),
            _delta(s["tool_s"], t["tool_s"], "{:+.2f}"),
        )
    )
    head = f"{before.get('model', '?')} -> {after.get('model', '?')}\n"
    return head + _grid(rows)


def _by_task(attempts: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each task over its trials: passed if most of them passed, figures summed."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for attempt in attempts:
        grouped.setdefault(attempt["name"], []).append(attempt)
    return {
        name: {
            "passed": sum(bool(a["passed"]) for a in runs) * 2 > len(runs),
            **{k: sum(a[k] for a in runs) for k in ("tokens", "wall_s", "tool_s")},
        }
        for name, runs in grouped.items()
    }


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data.get("tasks"), list) or "summary" not in data:
        raise ValueError(f"{path} is not the --json output of burrow eval")
    return data


def _flip(was: bool, now: bool) -> str:
    if was == now:
        return "pass" if now else "fail"
    return "FIXED" if now else "BROKE"


def _delta(a: float, b: float, form: str) -> str:
    return form.format(b - a) if a != b else "="


def _grid(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)
