"""An eval run's results as JSON, a readable table, a PNG chart, and a comparison of two."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from burrow.evals.runner import TaskResult

COLUMNS = ("task", "status", "check", "tokens", "cost $", "wall s", "ttft s", "tool s", "calls")


def summary(results: Sequence[TaskResult]) -> dict[str, Any]:
    count = len(results)
    return {
        "tasks": count,
        "passed": sum(r.passed for r in results),
        "pass_rate": round(sum(r.passed for r in results) / count, 4) if count else 0.0,
        "met_expectation": sum(r.met_expectation for r in results),
        "tokens": sum(r.tokens for r in results),
        "cost": round(sum(r.cost for r in results), 6),
        "wall_s": round(sum(r.wall_s for r in results), 3),
        "tool_s": round(sum(r.tool_s for r in results), 3),
    }


def as_json(results: Sequence[TaskResult], model: str) -> dict[str, Any]:
    return {
        "model": model,
        "summary": summary(results),
        "tasks": [r.as_json() for r in results],
    }


def table(results: Sequence[TaskResult]) -> str:
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
            f"{total['passed']}/{total['tasks']} passed",
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


def compare(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Per task: what changed between two `--json` files (pass/fail first, then figures)."""
    old = {t["name"]: t for t in before["tasks"]}
    new = {t["name"]: t for t in after["tasks"]}
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
