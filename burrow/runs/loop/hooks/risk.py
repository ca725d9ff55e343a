"""How risky a tool call is, judged from the tool's declared flags and its arguments.

Three levels: `safe` (reads only), `mutating` (changes the sandbox: the normal work of a
coding agent) and `dangerous` (destroys a lot at once, reaches out, or escalates). A tool
that runs a shell command is judged by the command, never less than its flags say. Some
commands are refused outright whatever the mode: they can only be mistakes or attacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from burrow.runs.journal.events import Risk
from burrow.tools.base import ToolKind
from burrow.tools.registry import declared_kind

LEVELS: dict[Risk, int] = {"safe": 0, "mutating": 1, "dangerous": 2}

# Clearly destructive: refused with the reason, never asked.
FORBIDDEN: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"\brm\s+(-[a-zA-Z]*[rR][a-zA-Z]*\s+|--recursive\s+)*(-[a-zA-Z]+\s+)*"
            r"(/|/\*|~|~/|\$HOME|/workspace/?)(\s|$|;|&)"
        ),
        "deletes the whole filesystem, home or workspace",
    ),
    (re.compile(r"\bmkfs(\.\w+)?\b"), "formats a filesystem"),
    (re.compile(r"\bdd\b[^|;&]*\bof=/dev/"), "writes raw data to a device"),
    (re.compile(r">\s*/dev/(sd|nvme|vd|hd|xvd)"), "overwrites a disk device"),
    (re.compile(r":\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:\s*&[^}]*\}\s*;\s*:"), "is a fork bomb"),
    (re.compile(r"\b(shutdown|reboot|halt|poweroff)\b"), "shuts the machine down"),
    (
        re.compile(r"\bchmod\s+(-[a-zA-Z]*R[a-zA-Z]*\s+)+[0-7]*\s*/(\s|$)"),
        "changes permissions of /",
    ),
]

# Risky but sometimes meant: asked in the default mode.
DANGEROUS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"\brm\s+(-[a-zA-Z]*\s+)*-[a-zA-Z]*[rRf]"),
        "deletes files recursively or forcibly",
    ),
    (re.compile(r"\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b"), "runs a downloaded script"),
    (re.compile(r"\bsudo\b|\bsu\s"), "asks for elevated privileges"),
    (re.compile(r"\bgit\s+push\b.*(--force|-f\b)"), "force-pushes"),
    (re.compile(r"\bgit\s+(reset\s+--hard|clean\s+-[a-zA-Z]*f)"), "discards work in git"),
    (re.compile(r"\bkill(all)?\s+(-\d+\s+|-[A-Z]+\s+)*-1\b"), "signals every process"),
    (re.compile(r"\bfind\b.*\s-delete\b"), "deletes the files it finds"),
]

READ_ONLY_COMMANDS = {
    "ls",
    "pwd",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "rg",
    "echo",
    "which",
    "file",
    "stat",
    "du",
    "df",
    "tree",
    "env",
    "printenv",
    "date",
    "whoami",
    "id",
    "uname",
    "true",
    "diff",
    "sort",
    "uniq",
    "cut",
    "less",
    "more",
    "realpath",
    "dirname",
    "basename",
}
READ_ONLY_GIT = {"status", "diff", "log", "show", "branch", "rev-parse", "remote"}


@dataclass(frozen=True)
class Assessment:
    risk: Risk
    reason: str
    forbidden: bool = False


def assess(tool: str, arguments: dict[str, Any], kind: ToolKind | None = None) -> Assessment:
    """The call's risk; `kind`: the tool's flags (default: those of the default tool `tool`)."""
    kind = kind if kind is not None else declared_kind(tool)
    declared = assess_kind(tool, kind)
    if kind.shell is None:
        return declared
    judged = assess_command(str(arguments.get(kind.shell, "")))
    if judged.forbidden or LEVELS[judged.risk] > LEVELS[declared.risk]:
        return judged
    return declared


def assess_kind(tool: str, kind: ToolKind) -> Assessment:
    """The risk the flags alone give: the whole risk of a tool that runs no command."""
    if kind.destructive:
        return Assessment("dangerous", f"{tool} may delete or overwrite a lot at once.")
    if kind.network:
        return Assessment("dangerous", f"{tool} reaches beyond the sandbox.")
    if kind.writes:
        return Assessment("mutating", f"{tool} changes the workspace or starts a service.")
    if kind.reads:
        return Assessment("safe", f"{tool} only reads.")
    if kind.shell is not None:
        return Assessment("safe", f"{tool} does what its command does.")
    return Assessment("mutating", f"{tool} does not declare what it does; judged as writing.")


def assess_command(command: str) -> Assessment:
    for pattern, reason in FORBIDDEN:
        if pattern.search(command):
            return Assessment("dangerous", f"The command {reason}.", forbidden=True)
    for pattern, reason in DANGEROUS:
        if pattern.search(command):
            return Assessment("dangerous", f"The command {reason}.")
    if _read_only(command):
        return Assessment("safe", "The command only reads.")
    return Assessment("mutating", "The command runs in the sandbox and may change it.")


def _read_only(command: str) -> bool:
    if re.search(r"[<>`]|\$\(", command):
        return False  # redirections and substitutions can write or run anything
    for segment in re.split(r"&&|\|\||[;|&\n]", command):
        words = segment.split()
        if not words:
            continue
        if words[0] == "git" and len(words) > 1 and words[1] in READ_ONLY_GIT:
            continue
        if words[0] == "cd" or words[0] in READ_ONLY_COMMANDS:
            continue
        return False
    return True
