from __future__ import annotations

import re

import pytest

from burrow.sandbox.local import LocalSandbox
from burrow.tools.base import ToolError, ToolLimits
from burrow.tools.files import EditFileTool, ReadFileTool, WriteFileTool
from tests.sandbox.harness import run
from tests.tools.harness import RecordingContext

read_file, write_file, edit_file = ReadFileTool(), WriteFileTool(), EditFileTool()


async def test_write_then_read_round_trips_text(sandbox: LocalSandbox) -> None:
    ctx = RecordingContext(sandbox).ctx
    written = await write_file.run({"path": "src/app.py", "content": "a\nb\nc\n"}, ctx)
    assert written.output == "Wrote 6 bytes (3 lines) to src/app.py."
    result = await read_file.run({"path": "/workspace/src/app.py"}, ctx)
    assert (result.output, result.truncated) == ("a\nb\nc\n", False)


async def test_read_pages_by_lines_with_a_note_when_more_remain(sandbox: LocalSandbox) -> None:
    ctx = RecordingContext(sandbox, ToolLimits(read_lines=3)).ctx
    await write_file.run({"path": "n.txt", "content": "".join(f"{i}\n" for i in range(1, 11))}, ctx)
    first = await read_file.run({"path": "n.txt"}, ctx)
    assert (
        first.output
        == "1\n2\n3\n\n[Showing lines 1-3 of 10. Call read_file with offset=4 to read more.]"
    )
    assert first.truncated
    middle = await read_file.run({"path": "n.txt", "offset": 5, "limit": 2}, ctx)
    assert middle.output.startswith("5\n6\n\n[Showing lines 5-6 of 10.")
    last = await read_file.run({"path": "n.txt", "offset": 9, "limit": 5}, ctx)
    assert (last.output, last.truncated) == ("9\n10\n", False)
    with pytest.raises(
        ToolError, match=re.escape("offset 11 is past the end of n.txt, which has 10 lines")
    ):
        await read_file.run({"path": "n.txt", "offset": 11}, ctx)


async def test_read_refuses_binary_files_and_reports_missing_ones(sandbox: LocalSandbox) -> None:
    ctx = RecordingContext(sandbox).ctx
    await sandbox.write_file("blob.bin", b"\x00\x01\x02")
    with pytest.raises(ToolError, match=re.escape("blob.bin is a binary file")):
        await read_file.run({"path": "blob.bin"}, ctx)
    with pytest.raises(ToolError, match=re.escape("File not found: nope.txt")):
        await read_file.run({"path": "nope.txt"}, ctx)


async def test_edit_replaces_exactly_one_occurrence(sandbox: LocalSandbox) -> None:
    ctx = RecordingContext(sandbox).ctx
    await write_file.run({"path": "f.py", "content": "x = 1\ny = 2\nx = 1\n"}, ctx)
    with pytest.raises(
        ToolError, match=re.escape("occurs 2 times in f.py; include more surrounding")
    ):
        await edit_file.run({"path": "f.py", "old_text": "x = 1", "new_text": "x = 3"}, ctx)
    with pytest.raises(ToolError, match=re.escape("old_text was not found in f.py")):
        await edit_file.run({"path": "f.py", "old_text": "z = 1", "new_text": "z = 3"}, ctx)
    edited = await edit_file.run(
        {"path": "f.py", "old_text": "y = 2\nx = 1", "new_text": "y = 20\nx = 10"}, ctx
    )
    assert edited.output == "Edited f.py: replaced 1 occurrence at line 2."
    assert await sandbox.read_file("f.py") == b"x = 1\ny = 20\nx = 10\n"


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "etc-link/passwd"])
async def test_paths_outside_the_workspace_are_tool_errors(
    sandbox: LocalSandbox, path: str
) -> None:
    ctx = RecordingContext(sandbox).ctx
    await run(sandbox, "ln", "-s", "/etc", "etc-link")
    expected = f"Path '{path}' is outside the workspace"
    with pytest.raises(ToolError, match=re.escape(expected)):
        await read_file.run({"path": path}, ctx)
    with pytest.raises(ToolError, match=re.escape(expected)):
        await write_file.run({"path": path, "content": "x"}, ctx)
    with pytest.raises(ToolError, match=re.escape(expected)):
        await edit_file.run({"path": path, "old_text": "root", "new_text": "toor"}, ctx)


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        (read_file, {}, "Invalid arguments for read_file: 'path' is required"),
        (read_file, {"path": "a", "offset": 0}, "'offset'"),
        (read_file, {"path": "a", "limit": "ten"}, "'limit' must be an integer"),
        (write_file, {"path": "a"}, "'content' is required"),
        (edit_file, {"path": "a", "old_text": "x"}, "'new_text' is required"),
        (edit_file, {"path": "a", "old_text": "", "new_text": "x"}, "old_text is empty"),
        (write_file, ["a", "b"], "expected a JSON object"),
    ],
)
async def test_invalid_arguments_are_precise_tool_errors(
    sandbox: LocalSandbox, tool: object, arguments: object, message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        await tool.run(arguments, RecordingContext(sandbox).ctx)  # type: ignore[attr-defined]
