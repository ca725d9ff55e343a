"""A diff between two checkpoints, as git prints it, made into per-file records.

git gives three views of one diff: the raw list (status per path, NUL-separated, names
verbatim), numstat (line counts, "-" for binary files) and the patch (names C-quoted when
they hold special bytes). They are joined by path; each patch is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PATCH_LIMIT_PER_FILE = 64 * 1024
PATCH_LIMIT_TOTAL = 4 * 1024 * 1024
PATCH_CUT = "\n[… patch truncated: {more} more characters of this file's diff are left out …]\n"
PATCH_LEFT_OUT = "[patch left out: the whole diff passed {limit} bytes]\n"


@dataclass
class FileChange:
    path: str
    status: str  # added | modified | deleted
    additions: int = 0
    deletions: int = 0
    binary: bool = False
    patch: str = ""


@dataclass
class Diff:
    files: list[FileChange] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # too large to checkpoint (the "to" side now)
    truncated: bool = False  # more than the bounds allowed: patches cut or left out


_STATUS = {"A": "added", "D": "deleted"}  # M, T (file <-> symlink) and the rest: modified


def assemble(raw: bytes, numstat: bytes, patch: str) -> Diff:
    diff = Diff()
    by_path: dict[str, FileChange] = {}
    fields = raw.split(b"\0")
    # -z raw: ":<modes> <shas> <status>\0<path>\0" per file.
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(b":"):
            continue
        name = path.decode("utf-8", errors="replace")
        change = FileChange(name, _STATUS.get(meta.decode()[-1:], "modified"))
        by_path[name] = change
        diff.files.append(change)
    for record in numstat.split(b"\0"):
        added, _, rest = record.partition(b"\t")
        deleted, _, path = rest.partition(b"\t")
        counted = by_path.get(path.decode("utf-8", errors="replace"))
        if counted is None:
            continue
        if added == b"-":
            counted.binary = True
        else:
            counted.additions += int(added)
            counted.deletions += int(deleted)
    for name, text in _split_patch(patch):
        section = by_path.get(name)
        if section is not None:
            section.patch += text
    for change in diff.files:
        if len(change.patch) > PATCH_LIMIT_PER_FILE:
            more = len(change.patch) - PATCH_LIMIT_PER_FILE
            change.patch = change.patch[:PATCH_LIMIT_PER_FILE] + PATCH_CUT.format(more=more)
            diff.truncated = True
    return diff


def _split_patch(patch: str) -> list[tuple[str, str]]:
    """(path, section) per `diff --git` header. A content line never starts with "diff"
    (every one starts with " ", "+", "-", "@" or "\\"), and git quotes a name that holds a
    newline, so each header is one line."""
    sections: list[tuple[str, str]] = []
    for chunk in ("\n" + patch).split("\ndiff --git ")[1:]:
        header, _, _ = chunk.partition("\n")
        sections.append((_header_path(header), "diff --git " + chunk + "\n"))
    return sections


def _header_path(header: str) -> str:
    """The path of `a/<p> b/<p>` (no renames: both sides name the same file)."""
    if header.startswith('"'):
        return _unquote(header)[2:]
    return header[2 : 2 + (len(header) - 5) // 2]


def _unquote(text: str) -> str:
    """The first C-quoted string of `text`, as git writes names with special bytes."""
    out, i = bytearray(), 1
    escapes = {"n": 10, "t": 9, '"': 34, "\\": 92, "a": 7, "b": 8, "f": 12, "r": 13, "v": 11}
    while i < len(text) and text[i] != '"':
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in escapes:
                out.append(escapes[nxt])
                i += 2
                continue
            if nxt.isdigit():
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
        out += ch.encode()
        i += 1
    return out.decode("utf-8", errors="replace")
