"""Harbor-format tasks through `burrow eval --agent oracle`: a real embedded server builds
each task's Dockerfile as an environment (real sandboxes; tree-layout installs a package
from Debian's archive) and runs the task's own solution, then its verifier. Every shipped
task passes; a wrong solution or a failing build fails the eval and says why."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from burrow.evals.harbor import load_harbor_task
from burrow.evals.suite import HARBOR_SUITE, load_suite
from burrow.evals.task import SuiteError
from tests.evals.test_eval_command import burrow_eval


@pytest.mark.timeout(900)
def test_every_shipped_task_passes_its_oracle(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = burrow_eval(
        "--agent", "oracle", "--suite", str(HARBOR_SUITE), "--json", str(out),
        "--data-dir", str(tmp_path / "d"), timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    tasks = {t["name"]: t for t in json.loads(out.read_text())["tasks"]}
    assert set(tasks) == {"greeter-env", "service-account", "tree-layout", "word-frequency"}
    assert all(t["passed"] and t["status"] == "completed" for t in tasks.values()), tasks
    assert "4/4 passed" in done.stdout
    assert "oracle" in out.read_text()  # the results say who did the tasks


@pytest.mark.timeout(600)
def test_a_wrong_solution_or_a_failing_build_fails_the_eval(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    wrong = suite / "wrong-solution"
    shutil.copytree(HARBOR_SUITE / "word-frequency", wrong)
    (wrong / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")  # changes nothing
    broken = suite / "broken-build"
    shutil.copytree(HARBOR_SUITE / "word-frequency", broken)
    (broken / "instruction.md").write_text("Another task, whose environment cannot build.\n")
    (broken / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm\nRUN echo the build breaks here && exit 3\n"
    )
    out = tmp_path / "results.json"
    done = burrow_eval(
        "--agent", "oracle", "--suite", str(suite), "--json", str(out),
        "--data-dir", str(tmp_path / "d"),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    tasks = {t["name"]: t for t in json.loads(out.read_text())["tasks"]}
    assert tasks["wrong-solution"]["status"] == "completed"
    assert not tasks["wrong-solution"]["passed"]
    assert "FAIL: top 4 of corpus.txt" in tasks["wrong-solution"]["check_output"]
    assert "reward: 0" in tasks["wrong-solution"]["check_output"]
    assert tasks["broken-build"]["status"] == "error" and not tasks["broken-build"]["passed"]
    assert "its build exited with 3" in tasks["broken-build"]["error"]
    assert "the build breaks here" in tasks["broken-build"]["error"]
    assert "the oracle did not pass" in done.stdout


def test_a_task_folder_that_reaches_out_is_refused(tmp_path: Path) -> None:
    task = tmp_path / "suite" / "reach"
    shutil.copytree(HARBOR_SUITE / "greeter-env", task)
    os.symlink("/etc/shadow", task / "tests" / "shadow")
    with pytest.raises(SuiteError, match="is a link"):
        load_harbor_task(task)
    (task / "tests" / "shadow").unlink()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm\nCOPY ../../x /x\n")
    with pytest.raises(SuiteError, match="leaves the build context"):
        load_suite(task.parent)


def test_tasks_with_the_same_dockerfile_share_one_environment() -> None:
    tasks = {t.name: t for t in load_suite(HARBOR_SUITE)}
    greeter = tasks["greeter-env"]
    assert greeter.environment is not None
    assert greeter.environment.name == f"harbor-{greeter.environment.key[:12]}"
    assert greeter.prompt.endswith("(Work in /opt/greeter.)")
    assert [path for path, _ in greeter.check_files] == [".burrow/eval/tests/test.sh"]
    names = {t.environment.name for t in tasks.values() if t.environment is not None}
    assert len(names) == len(tasks)  # four different Dockerfiles, four builds


def test_the_task_toml_s_timeouts_are_the_run_s_and_the_verifier_s(tmp_path: Path) -> None:
    task = tmp_path / "timed"
    shutil.copytree(HARBOR_SUITE / "greeter-env", task)
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml.replace("timeout_sec = 120.0", "timeout_sec = 45"))
    loaded = load_harbor_task(task)
    assert (loaded.timeout, loaded.check_timeout) == (600.0, 45.0)
    (task / "task.toml").write_text(toml.replace("timeout_sec = 120.0", "timeout_sec = -1"))
    with pytest.raises(SuiteError, match="timeout_sec must be a positive number"):
        load_harbor_task(task)
