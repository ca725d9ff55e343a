"""`burrow serve --help` describes every flag, and the variable each one overrides."""

from __future__ import annotations

import re
import subprocess
import sys


def test_every_serve_flag_is_described_with_its_setting() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "burrow.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "400", "PATH": ""},  # one line per option
        check=True,
    ).stdout
    options = re.findall(r"^  (--[a-z-]+)(?: [A-Z_]+)?\s+(.*)$", shown, re.MULTILINE)
    flags = dict(options)
    assert set(flags) >= {"--host", "--port", "--preview-port", "--data-dir", "--model"}
    for flag, text in flags.items():
        if flag in ("--help", "--timings"):  # about this one start, not a setting
            continue
        setting = "BURROW_" + flag.removeprefix("--").replace("-", "_").upper()
        assert setting in text, (flag, text)
        assert len(text) > len(setting) + 20, (flag, text)  # says more than the name
