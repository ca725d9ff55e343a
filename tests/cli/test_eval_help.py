"""`burrow eval --help` names its models, not the source's placeholders."""

from __future__ import annotations

import subprocess
import sys

from burrow.evals.command import REPLAY, SCRIPTED


def test_eval_help_names_the_offline_models() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "burrow.cli", "eval", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "400", "PATH": ""},
        check=True,
    ).stdout
    assert "{REPLAY}" not in shown and "{SCRIPTED}" not in shown, shown
    assert f"`{SCRIPTED}`" in shown and f"`{REPLAY}`" in shown
