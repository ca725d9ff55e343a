"""One eval task as the runner sees it, whichever folder format it was read from
(suite.py's own, harbor.py's Terminal-Bench one)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from burrow.runs.workspace.environments import EnvironmentSpec

Files = tuple[tuple[str, bytes], ...]  # (workspace-relative path, content)


class SuiteError(ValueError):
    """A task folder that cannot be run; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Expectation:
    """What the scripted run of a task must end with (asserted in CI)."""

    status: str = "completed"
    passed: bool = True
    compacted: bool = False  # the run compacted its context at least once


@dataclass(frozen=True)
class Task:
    name: str
    folder: Path
    prompt: str
    check: bytes  # run in the sandbox after the run (bash): exit 0 = passed
    timeout: float = 300.0
    check_timeout: float = 120.0  # the check's own (a Harbor task's [verifier] timeout_sec)
    approval_mode: str = "auto"
    budget: dict[str, float] = field(default_factory=dict)
    expect: Expectation = Expectation()
    check_files: Files = ()  # uploaded with the check, after the run
    solution: bytes | None = None  # what --agent oracle runs instead of the model (bash)
    solution_files: Files = ()  # uploaded before the solution runs
    environment: EnvironmentSpec | None = None  # the sandbox's system (None: the host's)

    def setup_files(self) -> Iterator[tuple[str, bytes]]:
        """(workspace-relative path, content) of every file under setup/."""
        root = self.folder / "setup"
        for path in sorted(root.rglob("*")) if root.is_dir() else []:
            if path.is_file():
                yield path.relative_to(root).as_posix(), path.read_bytes()

    def script(self) -> list[Any]:
        path = self.folder / "script.json"
        if not path.exists():
            return []
        turns = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(turns, list):
            raise SuiteError(f"{path}: must be a JSON list of turns")
        return turns
