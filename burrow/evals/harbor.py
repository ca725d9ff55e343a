"""Harbor-format tasks (Terminal-Bench's) as eval tasks.

    <task>/task.toml              [agent] timeout_sec, [verifier] timeout_sec, [metadata]
    <task>/instruction.md         what the agent is asked
    <task>/environment/Dockerfile its system, within the subset dockerfile.py builds
    <task>/tests/test.sh          the verifier: writes /logs/verifier/reward.txt (or .json)
    <task>/solution/solve.sh      the task's own solution, for --agent oracle

Harbor runs a task in a container whose working directory is its Dockerfile's WORKDIR, copies
`tests/` to /tests after the agent is done, runs `bash /tests/test.sh` and reads the reward;
the oracle copies `solution/` to /solution and runs `bash /solution/solve.sh`. Burrow does the
same in the conversation's sandbox, which stands on the Dockerfile's environment (built once,
shared by every task with the same Dockerfile): the files go up through the uploads route,
the scripts run through a terminal, as for any task. A reward of 1 passes.
"""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import replace
from pathlib import Path

from burrow.evals.task import Files, SuiteError, Task
from burrow.runs.workspace.dockerfile import DockerfileError, parse_dockerfile

UPLOADED = ".burrow/eval"  # under the workspace: where tests/ and solution/ are uploaded
MAX_TASK_FILE_BYTES = 4 << 20  # tests and solutions are scripts and small fixtures
MAX_TASK_FILES = 500


def is_harbor_task(folder: Path) -> bool:
    return (folder / "instruction.md").is_file() and (folder / "tests" / "test.sh").is_file()


def load_harbor_task(folder: Path) -> Task:
    where = folder / "task.toml"
    try:
        spec = tomllib.loads(where.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{where}: {exc}") from exc
    instruction = (folder / "instruction.md").read_text(encoding="utf-8").strip()
    if not instruction:
        raise SuiteError(f"{folder / 'instruction.md'}: is empty")
    dockerfile = folder / "environment" / "Dockerfile"
    if not dockerfile.is_file():
        raise SuiteError(f"{folder}: needs environment/Dockerfile")
    try:
        recipe = parse_dockerfile("harbor", dockerfile.read_text(), dockerfile.parent)
    except DockerfileError as exc:
        raise SuiteError(f"{dockerfile}: {exc}") from exc
    # One build for every task with the same Dockerfile: the name is the build's key.
    environment = replace(recipe.spec, name=f"harbor-{recipe.spec.key[:12]}")
    workdir = recipe.workdir
    solve = folder / "solution" / "solve.sh"
    return Task(
        name=folder.name,
        folder=folder,
        # Harbor's agent starts in the WORKDIR; a Burrow run starts in /workspace.
        prompt=f"{instruction}\n\n(Work in {workdir}.)" if workdir != "/" else instruction,
        check=_verifier(workdir).encode(),
        timeout=_seconds(_section(spec, "agent", where).get("timeout_sec", 600), where),
        check_timeout=_seconds(_section(spec, "verifier", where).get("timeout_sec", 120), where),
        check_files=_files(folder / "tests", f"{UPLOADED}/tests"),
        solution=_oracle(workdir).encode() if solve.is_file() else None,
        solution_files=_files(folder / "solution", f"{UPLOADED}/solution"),
        environment=environment,
    )


def _section(spec: dict[str, object], name: str, where: Path) -> dict[str, object]:
    section = spec.get(name, {})
    if not isinstance(section, dict):
        raise SuiteError(f"{where}: [{name}] must be a table")
    return section


def _seconds(value: object, where: Path) -> float:
    if not isinstance(value, int | float) or value <= 0:
        raise SuiteError(f"{where}: timeout_sec must be a positive number")
    return float(value)


def _verifier(workdir: str) -> str:
    """Harbor's verifier step: tests at /tests, test.sh from the WORKDIR, the reward read."""
    return f"""set -u
rm -rf /tests /logs/verifier && mkdir -p /tests /logs/verifier
cp -a /workspace/{UPLOADED}/tests/. /tests/
cd {shlex.quote(workdir)}
bash /tests/test.sh
code=$?
reward=$(cat /logs/verifier/reward.txt 2>/dev/null \\
  || sed -n 's/.*"reward"[^0-9.]*\\([0-9.]*\\).*/\\1/p' /logs/verifier/reward.json 2>/dev/null)
echo "[burrow] test.sh exited $code; reward: ${{reward:-none}}"
case "$(echo "$reward" | tr -d '[:space:]')" in 1|1.0|1.00) exit 0 ;; esac
exit 1
"""


def _oracle(workdir: str) -> str:
    return f"""set -u
rm -rf /solution && mkdir -p /solution
cp -a /workspace/{UPLOADED}/solution/. /solution/
cd {shlex.quote(workdir)}
bash /solution/solve.sh
"""


def _files(root: Path, under: str) -> Files:
    """Every plain file under `root`, as (workspace path under `under`, content); a link or
    an oversized folder is refused (the task folder is someone else's)."""
    if not root.is_dir():
        return ()
    found: list[tuple[str, bytes]] = []
    total = 0
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            raise SuiteError(f"{path}: is a link; a task's files are plain files")
        if not path.is_file():
            continue
        total += path.stat().st_size
        if total > MAX_TASK_FILE_BYTES or len(found) >= MAX_TASK_FILES:
            raise SuiteError(f"{root}: more than {MAX_TASK_FILE_BYTES >> 20} MiB of files")
        found.append((f"{under}/{path.relative_to(root).as_posix()}", path.read_bytes()))
    return tuple(found)
