"""`burrow eval` end to end: a real embedded server, real sandboxes, the scripted model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from burrow.evals.report import summary
from burrow.evals.runner import TaskResult
from burrow.evals.suite import SUITE

REPO = Path(__file__).resolve().parents[2]


def burrow_eval(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "burrow.cli", "eval", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.mark.timeout(600)  # the whole suite, four tasks at a time
def test_the_scripted_suite_meets_every_expectation(tmp_path: Path) -> None:
    out, chart = tmp_path / "results.json", tmp_path / "chart.png"
    done = burrow_eval("--json", str(out), "--chart", str(chart), "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    tasks = {t["name"]: t for t in results["tasks"]}
    assert len(tasks) >= 20
    assert all(t["met_expectation"] for t in tasks.values()), done.stdout
    # The kinds of work the suite must cover, each ending as it should.
    assert tasks["stops-at-budget"]["status"] == "budget_exceeded"
    assert tasks["long-task-compacts"]["compactions"] >= 1
    assert tasks["fix-failing-test"]["passed"] and tasks["fix-failing-test"]["tool_calls"] == 4
    for task in tasks.values():
        assert task["tokens"] > 0 and task["wall_s"] > 0 and task["ttft_s"] is not None
    assert results["summary"]["pass_rate"] == 1.0
    assert "total" in done.stdout and "23/23 passed" in done.stdout
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(300)
def test_the_real_model_path_against_a_fake_openai_server(tmp_path: Path) -> None:
    """`--model replay`: Burrow's OpenAI provider (streaming, tool calls, usage, prices)
    against a fake server that replays the scripts at a real model's pace."""
    out = tmp_path / "results.json"
    tasks = ("create-file", "fix-failing-test", "stops-at-budget")
    done = burrow_eval(
        "--model", "replay", "--only", *tasks, "--json", str(out), "--data-dir", str(tmp_path / "d")
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert "fake OpenAI server" in results["model"] and "tokens/s" in results["model"]
    by_name = {t["name"]: t for t in results["tasks"]}
    assert all(t["met_expectation"] for t in by_name.values()), done.stdout
    for task in by_name.values():
        assert task["ttft_s"] >= 0.4  # the modeled first-token time (0.8 s, +/- 25 %)
        assert task["cost"] > 0  # priced as the shape says
    assert by_name["fix-failing-test"]["model_calls"] == 5


@pytest.mark.timeout(300)
def test_a_task_that_regresses_fails_the_eval(tmp_path: Path) -> None:
    """CI runs the suite: a change that makes a task end otherwise must turn it red."""
    suite = tmp_path / "suite"
    shutil.copytree(SUITE / "create-file", suite / "create-file")
    shutil.copytree(SUITE / "stops-at-budget", suite / "stops-at-budget")
    script = suite / "create-file" / "script.json"
    turns = json.loads(script.read_text())
    turns[0]["tool_calls"][0]["arguments"]["content"] = "Hello, world!\n"  # the wrong file
    script.write_text(json.dumps(turns))
    done = burrow_eval("--suite", str(suite), "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "create-file: expected completed/pass, got completed/fail" in done.stdout
    assert "stops-at-budget: expected" not in done.stdout


def test_compare_names_what_broke_and_what_was_fixed(tmp_path: Path) -> None:
    def run(passed: dict[str, bool], tokens: int) -> Path:
        tasks = [
            {"name": n, "passed": p, "tokens": tokens, "wall_s": 1.0, "tool_s": 0.5}
            for n, p in passed.items()
        ]
        rate = sum(passed.values()) / len(passed)
        summary = {"pass_rate": rate, "tokens": tokens * len(tasks), "wall_s": 2.0, "tool_s": 1.0}
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps({"model": "m", "summary": summary, "tasks": tasks}))
        return path

    before = run({"a": True, "b": False}, 100)
    after = run({"a": False, "b": True}, 120)
    done = burrow_eval("--compare", str(before), str(after))
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert "BROKE" in lines["a"] and "+20" in lines["a"]
    assert "FIXED" in lines["b"]
    assert "50% -> 50%" in lines["total"]


def test_a_broken_suite_is_refused_with_the_reason(tmp_path: Path) -> None:
    task = tmp_path / "suite" / "t"
    task.mkdir(parents=True)
    (task / "task.toml").write_text('prompt = "x"\n[budget]\nmoney = 3\n')
    (task / "check.sh").write_text("true\n")
    done = burrow_eval("--suite", str(tmp_path / "suite"))
    assert done.returncode == 2
    assert "budget keys are" in done.stderr
    done = burrow_eval("--only", "no-such-task")
    assert done.returncode == 2 and "No task named no-such-task" in done.stderr


@pytest.mark.timeout(300)
def test_trials_sample_each_task_and_report_pass_at_1_with_its_interval(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = burrow_eval(
        "--trials", "2", "--only", "create-file", "stops-at-budget", "--json", str(out),
        "--data-dir", str(tmp_path / "d"),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert results["trials"] == 2 and results["burrow_version"] and results["date"][:2] == "20"
    attempts = [(t["name"], t["trial"]) for t in results["tasks"]]
    assert attempts == [(n, k) for n in ("create-file", "stops-at-budget") for k in (1, 2)]
    summary = results["summary"]
    # The scripted model passes each task every time (the mixed case: the test below).
    assert summary["pass_at_1"] == 1.0 and summary["ci95"] == [1.0, 1.0]
    assert summary["errored"] == 0 and summary["attempts"] == 4 and summary["tasks"] == 2
    for task in results["tasks"]:
        assert task["prompt_tokens"] + task["completion_tokens"] == task["tokens"] > 0
        assert task["errored"] is False
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
    assert rows["create-file"][1] == "2/2" and rows["stops-at-budget"][1] == "2/2"
    assert rows["total"][1:4] == ["100%", "[100%,", "100%]"]


def test_pass_at_1_is_the_mean_of_the_trials_and_errors_count_apart() -> None:
    def result(name: str, trial: int, passed: bool, status: str = "completed") -> TaskResult:
        return TaskResult(
            name, status, passed, passed, 10, 0.0, 1.0, None, 0.0, 1, 1, 0, trial=trial
        )  # fmt: skip

    results = [
        result("a", 1, True), result("b", 1, True),  # trial 1: 100 %
        result("a", 2, True), result("b", 2, False, "failed"),  # trial 2: 50 %, one error
        result("a", 3, False, "error"), result("b", 3, False),  # trial 3: 0 %
    ]  # fmt: skip
    total = summary(results)
    assert total["pass_at_1"] == 0.5 and total["errored"] == 2 and total["trials"] == 3
    # mean 0.5, sd 0.5 over 3 trials: 0.5 +- 4.303 * 0.5 / sqrt(3), clipped to [0, 1]
    assert total["ci95"] == [0.0, 1.0]
    steady = [result("a", k, k != 2) for k in (1, 2, 3)]
    steady += [result("b", k, k == 2) for k in (1, 2, 3)]
    assert summary(steady)["ci95"] == [0.5, 0.5]
    assert summary(results[:2])["ci95"] is None  # one trial: no interval
