"""The preview tool on a real sandbox: start, wait, record, fail with the service's output."""

from __future__ import annotations

import asyncio
import json

from burrow.sandbox.local import LocalSandbox
from burrow.tools.base import ToolLimits
from burrow.tools.preview import PreviewTool, port_accepts, read_services
from tests.sandbox.harness import run
from tests.tools.harness import RecordingContext


async def test_starts_a_server_records_it_and_returns_the_preview(sandbox: LocalSandbox) -> None:
    recording = RecordingContext(sandbox)
    ctx = recording.ctx
    ctx.conversation_id = "c_1"
    ctx.preview_url = lambda port: f"http://{port}-c_1.preview.test/"
    await sandbox.write_file("site/index.html", b"hello")
    ctx.shell.cwd = "/workspace/site"

    result = await PreviewTool().run({"command": "python3 -m http.server 8000", "port": 8000}, ctx)

    assert not result.is_error, result.output
    assert result.extra["preview"] == {"port": 8000, "url": "http://8000-c_1.preview.test/"}
    assert await port_accepts(sandbox, 8000)
    services = json.loads(await sandbox.read_file(".burrow/services.json"))
    assert services == [
        {"port": 8000, "command": "python3 -m http.server 8000", "cwd": "/workspace/site"}
    ]
    reader, writer = await sandbox.open_tunnel(8000)
    writer.write(b"GET /index.html HTTP/1.0\r\n\r\n")
    assert (await reader.read()).endswith(b"\r\n\r\nhello")  # served from the shell's cwd
    writer.close()


async def test_a_second_preview_of_the_port_replaces_the_first(sandbox: LocalSandbox) -> None:
    ctx = RecordingContext(sandbox).ctx
    tool = PreviewTool()
    first = await tool.run({"command": "python3 -m http.server 8001", "port": 8001}, ctx)
    assert not first.is_error, first.output
    second = await tool.run(
        {"command": "python3 -m http.server 8001 --bind 127.0.0.1", "port": 8001}, ctx
    )
    assert not second.is_error, second.output
    assert second.extra["preview"]["url"] == "http://8001-local.preview.localhost:8421/"
    [record] = await read_services(sandbox)
    assert record.command.endswith("--bind 127.0.0.1")


async def test_a_command_that_exits_returns_its_output_as_an_error(sandbox: LocalSandbox) -> None:
    ctx = RecordingContext(sandbox).ctx
    result = await PreviewTool().run(
        {"command": "echo starting; echo 'boom: no such module' >&2; exit 3", "port": 8002}, ctx
    )
    assert result.is_error
    assert "exited (status 3)" in result.output
    assert "boom: no such module" in result.output
    assert "preview" not in result.extra
    assert await read_services(sandbox) == []


async def test_a_server_on_another_port_times_out_and_is_stopped(sandbox: LocalSandbox) -> None:
    ctx = RecordingContext(sandbox, ToolLimits(preview_timeout=0.5)).ctx
    result = await PreviewTool().run(
        {"command": "echo listening on 9999; python3 -m http.server 9999", "port": 8003}, ctx
    )
    assert result.is_error
    assert "within 0.5 s" in result.output and "listening on 9999" in result.output
    assert not await port_accepts(sandbox, 9999)  # the service was stopped


async def test_a_port_used_by_another_process_is_refused(sandbox: LocalSandbox) -> None:
    ctx = RecordingContext(sandbox).ctx
    await run(sandbox, "bash", "-c", "python3 -m http.server 8004 >/dev/null 2>&1 &")
    for _ in range(100):
        if await port_accepts(sandbox, 8004):
            break
        await asyncio.sleep(0.02)
    result = await PreviewTool().run({"command": "python3 -m http.server 8004", "port": 8004}, ctx)
    assert result.is_error and "already in use" in result.output
