"""`burrow serve --help` describes every flag, and the variable each one overrides."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest


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


def test_the_banner_names_the_flag_a_model_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BURROW_MODEL", "gpt-4.1")
    from burrow.cli import _settings

    assert _settings(argparse.Namespace(model=None)).model_source == "BURROW_MODEL"
    chosen = _settings(argparse.Namespace(model="demo"))
    assert (chosen.model, chosen.model_source) == ("demo", "--model")
