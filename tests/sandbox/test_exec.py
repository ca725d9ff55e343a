"""The guest's exec through the host client, in a real sandbox."""

from __future__ import annotations

import asyncio
import signal

import pytest

from burrow.sandbox.backend import (
    ErrorCode,
    ExecChunk,
    ExecExit,
    ExecRequest,
    Sandbox,
    SandboxError,
    closing_exec,
)
from burrow.sandbox.client import GuestClient
from burrow.sandbox.guest import protocol
from burrow.sandbox.local import LocalSandbox
from tests.sandbox.harness import run, sleeper, wait_for_no_processes


async def test_handshake_reports_version_and_features(sandbox: LocalSandbox) -> None:
    hello = await sandbox.client.handshake()
    assert tuple(hello["version"]) == protocol.PROTOCOL_VERSION
    assert "exec" in hello["features"]
    assert await sandbox.ping() < 1.0


async def test_a_client_with_another_major_version_gets_a_protocol_error(
    sandbox: LocalSandbox,
) -> None:
    major, _ = protocol.PROTOCOL_VERSION
    client = GuestClient(str(sandbox.socket_path), version=(major + 1, 0))
    with pytest.raises(SandboxError) as caught:
        await client.handshake()
    assert caught.value.code == ErrorCode.PROTOCOL
    assert "not compatible" in caught.value.message


async def test_stdout_stderr_and_exit_code_are_separate(any_sandbox: Sandbox) -> None:
    result = await run(any_sandbox, "sh", "-c", "echo out; echo err >&2; exit 3")
    assert result.stdout == b"out\n"
    assert result.stderr == b"err\n"
    assert result.exit.exit_code == 3
    assert result.exit.signal is None


async def test_output_is_binary_safe_and_stdin_is_delivered(any_sandbox: Sandbox) -> None:
    data = bytes(range(256)) * 1000
    result = await run(any_sandbox, "cat", stdin=data)
    assert result.stdout == data
    assert result.exit.exit_code == 0


async def test_cwd_env_and_result_file(any_sandbox: Sandbox) -> None:
    await run(any_sandbox, "mkdir", "-p", "sub")
    result = await run(
        any_sandbox,
        "sh",
        "-c",
        'pwd; echo "$GREETING"; echo done > /tmp/result',
        cwd=f"{any_sandbox.workspace}/sub",
        env={"GREETING": "hello"},
        result_file="/tmp/result",
    )
    assert result.text == f"{any_sandbox.workspace}/sub\nhello\n"
    assert result.exit.result == b"done\n"
    again = await run(any_sandbox, "test", "-e", "/tmp/result")
    assert again.exit.exit_code == 1, "the result file is removed once returned"


async def test_a_large_output_arrives_in_pieces_as_it_is_written(any_sandbox: Sandbox) -> None:
    """20 MB of output is streamed, never gathered whole on either side first."""
    size, pieces, largest = 20_000_000, 0, 0
    request = ExecRequest(argv=["head", "-c", str(size), "/dev/zero"])
    async with closing_exec(any_sandbox.exec(request)) as events:
        async for event in events:
            if isinstance(event, ExecChunk):
                pieces += 1
                largest = max(largest, len(event.data))
                size -= len(event.data)
    assert size == 0
    assert pieces > 10 and largest <= 4 << 20


async def test_a_signal_exit_is_reported(any_sandbox: Sandbox) -> None:
    result = await run(any_sandbox, "sh", "-c", "kill -TERM $$")
    assert result.exit.exit_code is None
    assert result.exit.signal == signal.SIGTERM


async def test_invalid_cwd_and_missing_program_are_typed_errors(any_sandbox: Sandbox) -> None:
    with pytest.raises(SandboxError) as caught:
        await run(any_sandbox, "true", cwd=f"{any_sandbox.workspace}/missing")
    assert caught.value.code == ErrorCode.INVALID_CWD
    with pytest.raises(SandboxError) as caught:
        await run(any_sandbox, "no-such-program")
    assert caught.value.code == ErrorCode.EXEC_NOT_FOUND


async def test_timeout_kills_the_whole_process_group(any_sandbox: Sandbox) -> None:
    marker = "timeout-group-7d1"
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await run(
        any_sandbox, "sh", "-c", f"{sleeper(marker)} & {sleeper(marker)}", timeout=0.5
    )
    assert result.exit.timed_out
    assert result.exit.signal == signal.SIGKILL
    assert loop.time() - started < 5
    assert await wait_for_no_processes(any_sandbox, marker) == 0


async def test_closing_the_stream_early_kills_the_command(any_sandbox: Sandbox) -> None:
    marker = "early-close-3f2"
    events = any_sandbox.exec(
        ExecRequest(argv=["sh", "-c", f"echo started; {sleeper(marker)} & {sleeper(marker)}"])
    )
    first = await anext(events)
    assert isinstance(first, ExecChunk) and first.data == b"started\n"
    await events.aclose()  # type: ignore[attr-defined]
    assert await wait_for_no_processes(any_sandbox, marker) == 0


async def test_cancelling_a_reader_kills_the_command(any_sandbox: Sandbox) -> None:
    marker = "cancel-9a4"
    started = asyncio.Event()

    async def consume() -> None:
        async for _ in any_sandbox.exec(
            ExecRequest(argv=["sh", "-c", f"echo go; {sleeper(marker)}"])
        ):
            started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_for_no_processes(any_sandbox, marker) == 0


async def test_a_background_server_outlives_its_exec_and_keeps_answering(
    any_sandbox: Sandbox,
) -> None:
    # The server inherits the exec's stdout/stderr and logs every request to stderr:
    # the exec must end when `sh` exits, and the guest must keep draining those pipes.
    started = await run(any_sandbox, "sh", "-c", "python3 -m http.server 8000 & echo started")
    assert started.text == "started\n"
    fetch = (
        "import time, urllib.request\n"
        "for attempt in range(100):\n"
        "    try:\n"
        "        print(urllib.request.urlopen('http://127.0.0.1:8000/').status); break\n"
        "    except OSError:\n"
        "        time.sleep(0.05)\n"
    )
    for _ in range(3):  # each request makes the server write a log line to the old pipe
        answer = await run(any_sandbox, "python3", "-c", fetch)
        assert answer.text == "200\n"
    # Far more log output than a pipe buffer holds (64 KiB): without draining, the
    # server would block on its next log line and stop answering.
    many = (
        "import urllib.error, urllib.request\n"
        "for i in range(600):\n"
        "    try:\n"
        "        urllib.request.urlopen('http://127.0.0.1:8000/missing-' + 'x' * 100)\n"
        "    except urllib.error.HTTPError:\n"
        "        pass\n"
    )
    assert (await run(any_sandbox, "python3", "-c", many, timeout=60)).exit.exit_code == 0
    assert (await run(any_sandbox, "python3", "-c", fetch)).text == "200\n"


async def test_a_malformed_request_gets_a_protocol_error_and_the_agent_survives(
    sandbox: LocalSandbox,
) -> None:
    reader, writer = await asyncio.open_unix_connection(str(sandbox.socket_path))
    garbage = b"{not json"
    writer.write(protocol.PREFIX.pack(len(garbage), 0) + garbage)
    decoder = protocol.FrameDecoder()
    frames = decoder.feed(await reader.read(65536))
    writer.close()
    assert frames[0].kind == "error"
    assert frames[0].header["code"] == "protocol"
    assert frames[0].header["fatal"] is True
    assert await sandbox.ping() < 1.0


async def test_a_command_whose_exit_was_read_is_no_longer_counted(any_sandbox: Sandbox) -> None:
    """The pool hibernates as soon as a tool's exit arrives: asked at once (no waiting, the
    generator left open as a caller that stops at the exit leaves it), the sandbox must not
    still count that command, or the hibernation is refused at random."""
    for _ in range(30):
        events = any_sandbox.exec(ExecRequest(["true"]))
        async with closing_exec(events):
            async for event in events:
                if isinstance(event, ExecExit):
                    break
            assert await any_sandbox.running_commands() == 0


async def test_running_commands_count_one_shot_commands_only(any_sandbox: Sandbox) -> None:
    """What hibernation waits for: a one-shot command counts while it runs, a background
    helper never does; and the sandbox answers a ping meanwhile."""
    assert await any_sandbox.running_commands() == 0
    for background, counted in ((False, 1), (True, 0)):
        events = any_sandbox.exec(
            ExecRequest(["sh", "-c", "echo up; sleep 30"], background=background)
        )
        async with closing_exec(events):
            assert isinstance(await anext(events), ExecChunk)
            assert await any_sandbox.running_commands() == counted
            assert await any_sandbox.ping() < 5
        for _ in range(100):  # a closed command is killed; its end is seen a moment later
            if await any_sandbox.running_commands() == 0:
                break
            await asyncio.sleep(0.05)
        assert await any_sandbox.running_commands() == 0
