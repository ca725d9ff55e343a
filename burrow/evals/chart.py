"""The PNG chart of an eval run: per task, wall time split into tool time and the rest,
green when the check passed, red when it failed; tokens beside each bar."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from burrow.evals.report import summary
from burrow.evals.runner import TaskResult

ROW, LABEL, BAR, MARGIN = 22, 190, 420, 16
PASSED, FAILED, TOOLS = (46, 160, 67), (200, 55, 55), (120, 120, 130)
INK, PAPER, GRID = (30, 30, 35), (255, 255, 255), (225, 225, 230)


def draw_chart(results: Sequence[TaskResult], model: str, path: Path) -> None:
    font = ImageFont.load_default()
    longest = max((r.wall_s for r in results), default=1.0) or 1.0
    height = MARGIN * 3 + ROW * (len(results) + 3)
    image = Image.new("RGB", (LABEL + BAR + 140 + MARGIN * 2, height), PAPER)
    pen = ImageDraw.Draw(image)
    total = summary(results)
    pen.text((MARGIN, MARGIN), f"burrow eval · {model}", fill=INK, font=font)
    pen.text(
        (MARGIN, MARGIN + 14),
        f"{total['passed']}/{total['attempts']} passed{_pass_at_1(total)} · "
        f"{total['tokens']} tokens · "
        f"${total['cost']:.4f} · {total['wall_s']:.1f} s of task time",
        fill=INK,
        font=font,
    )
    top = MARGIN * 2 + ROW * 2
    for step in range(5):  # vertical grid lines with seconds
        x = MARGIN + LABEL + BAR * step // 4
        pen.line([(x, top - 4), (x, top + ROW * len(results))], fill=GRID)
        pen.text((x - 6, top + ROW * len(results) + 4), f"{longest * step / 4:.1f}s", fill=INK)
    for i, r in enumerate(results):
        y = top + i * ROW
        label = r.name[:26] + (f" #{r.trial}" if total["trials"] > 1 else "")
        pen.text((MARGIN, y + 4), label, fill=INK, font=font)
        x0 = MARGIN + LABEL
        wall = max(1, round(BAR * r.wall_s / longest))
        tools = min(wall, round(BAR * r.tool_s / longest))
        pen.rectangle([x0, y + 3, x0 + wall, y + ROW - 5], fill=PASSED if r.passed else FAILED)
        if tools:
            pen.rectangle([x0, y + 3, x0 + tools, y + ROW - 5], fill=TOOLS)
        pen.text((x0 + wall + 6, y + 4), f"{r.status} · {r.tokens} tok", fill=INK, font=font)
    legend = top + ROW * len(results) + ROW
    for j, (color, name) in enumerate(
        ((TOOLS, "tool time"), (PASSED, "passed"), (FAILED, "failed"))
    ):
        x = MARGIN + LABEL + j * 120
        pen.rectangle([x, legend, x + 12, legend + 10], fill=color)
        pen.text((x + 18, legend - 1), name, fill=INK, font=font)
    image.save(path, format="PNG")


def _pass_at_1(total: dict[str, Any]) -> str:
    if total["trials"] < 2:
        return ""
    low, high = total["ci95"]
    rate, trials = total["pass_at_1"], total["trials"]
    return f" · pass@1 {rate:.0%} [{low:.0%}, {high:.0%}] over {trials} trials"
