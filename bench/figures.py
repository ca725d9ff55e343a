"""The benchmarks' figures as one JSON file, and the check that fails on a regression.

    python bench/figures.py collect LINES.jsonl OUT.json
    python bench/figures.py check LINES.jsonl bench/baseline.json [--factor 2]

`check` compares ratios, not raw values: each figure's ratio to a baseline measured in
the same run is what stays comparable on a noisy, shared machine. It fails when a ratio
is worse than the committed one by more than `factor` (higher for a time, lower for a
rate); figures missing on either side are listed, not failed, and so are tail figures
(p99): one stray scheduling delay on a shared machine moves them more than any regression.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def load_lines(path: Path) -> dict[str, dict[str, Any]]:
    figures = {}
    for line in path.read_text().splitlines():
        figure = json.loads(line)
        figures[figure["key"]] = figure
    return figures


def collect(lines: Path, out: Path) -> None:
    out.write_text(json.dumps(load_lines(lines), indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")


def regression(figure: dict[str, Any], committed: dict[str, Any]) -> float:
    """How many times worse the ratio got (below 1: it improved)."""
    now, then = figure["ratio"], committed["ratio"]
    worse = then / now if figure["higher_is_better"] else now / then
    return float(worse)


def check(lines: Path, baseline: Path, factor: float) -> int:
    measured = load_lines(lines)
    committed = json.loads(baseline.read_text())
    failed = 0
    for key, figure in sorted(measured.items()):
        if "p99" in key:
            print(f"tail      {key}: ratio {figure['ratio']:.2f}x (shown, not checked)")
            continue
        if key not in committed:
            print(f"new       {key}: ratio {figure['ratio']:.2f}x (not in {baseline.name})")
            continue
        worse = regression(figure, committed[key])
        verdict = "REGRESSED" if worse > factor else "ok"
        failed += verdict != "ok"
        print(
            f"{verdict:9} {key}: ratio {figure['ratio']:.2f}x, committed "
            f"{committed[key]['ratio']:.2f}x ({worse:.2f}x worse, limit {factor:g}x)"
        )
    for key in sorted(committed.keys() - measured.keys()):
        print(f"not run   {key}")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", choices=["collect", "check"])
    parser.add_argument("lines", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--factor", type=float, default=2.0)
    args = parser.parse_args()
    if args.command == "collect":
        collect(args.lines, args.target)
    else:
        sys.exit(check(args.lines, args.target, args.factor))
