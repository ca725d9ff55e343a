"""Interactive shells on a pseudo-terminal inside the sandbox."""

from __future__ import annotations

import asyncio

from burrow.sandbox.backend import Sandbox
from burrow.sandbox.local import LocalSandbox
from tests.sandbox.harness import (
    count_processes,
    read_pty_until,
    sleeper,
    wait_for_no_processes,
)


async def test_a_resize_shows_in_stty_size(any_sandbox: Sandbox) -> None:
    session = await any_sandbox.open_pty(100, 30)
    try:
        await session.write(b"stty size; echo SIZE-$((40+2))\n")
        assert b"30 100" in await read_pty_until(session, b"SIZE-42")
        await session.resize(120, 40)
        await session.write(b"stty size; echo RESIZED-$((40+3))\n")
        assert b"40 120" in await read_pty_until(session, b"RESIZED-43")
    finally:
        session.close()


async def test_ctrl_c_stops_the_foreground_job_and_the_shell_goes_on(
    any_sandbox: Sandbox,
) -> None:
    session = await any_sandbox.open_pty(80, 24)
    try:
        # Typed once the shell has run a command, as a person types at its prompt. Typed
        # ahead of bash's start-up, the job ran outside the terminal's foreground group in
        # CI (the line was echoed twice, before and after the prompt) and ^C reached bash
        # alone: bash's job-control start, not the sandbox's terminal.
        await session.write(b"echo READY-$((40+1))\n")
        await read_pty_until(session, b"READY-41")
        await session.write(f"{sleeper('ctrl-c-marker')} && echo NOT-INTERRUPTED\n".encode())
        await asyncio.sleep(0.3)
        assert await count_processes(any_sandbox, "ctrl-c-marker") == 1
        await session.write(b"\x03")
        seen = await read_pty_until(session, b"^C")
        left = await wait_for_no_processes(any_sandbox, "ctrl-c-marker", within=10)
        assert left == 0, f"the job outlived ^C; the terminal showed: {bytes(seen)!r}"
        await session.write(b"echo STILL-$((40+4))\n")
        output = await read_pty_until(session, b"STILL-44")
        assert b"NOT-INTERRUPTED" not in output
    finally:
        session.close()


async def test_exit_ends_the_session_with_its_status(any_sandbox: Sandbox) -> None:
    session = await any_sandbox.open_pty(80, 24)
    await session.write(f"cd {any_sandbox.workspace} && pwd && exit 3\n".encode())
    output = bytearray()
    async with asyncio.timeout(10):
        while data := await session.read():
            output += data
    assert any_sandbox.workspace.encode() in output
    assert session.exit is not None and session.exit.exit_code == 3


async def test_a_hangup_kills_the_shell_and_its_jobs(any_sandbox: Sandbox) -> None:
    session = await any_sandbox.open_pty(80, 24)
    await session.write(f"{sleeper('hangup-marker')} & echo STARTED-$((40+5))\n".encode())
    await read_pty_until(session, b"STARTED-45")
    session.close()
    assert await wait_for_no_processes(any_sandbox, "hangup-marker") == 0


async def test_a_hangup_kills_jobs_that_ignore_it(any_sandbox: Sandbox) -> None:
    """A job in its own process group that ignores SIGHUP (nohup, a trap) would outlive the
    closed terminal if only the shell's group were signalled: the whole session goes."""
    session = await any_sandbox.open_pty(80, 24)
    ignoring = f"nohup {sleeper('nohup-marker')} >/dev/null 2>&1 &"
    trapped = f"(trap '' HUP; exec {sleeper('trapped-marker')}) &"
    await session.write(f"{ignoring} {trapped} echo STARTED-$((40+6))\n".encode())
    await read_pty_until(session, b"STARTED-46")
    assert await wait_for_no_processes(any_sandbox, "nohup-marker", within=0.2) == 1
    session.close()
    assert await wait_for_no_processes(any_sandbox, "nohup-marker") == 0
    assert await wait_for_no_processes(any_sandbox, "trapped-marker") == 0


async def test_tiocsti_cannot_inject_input_into_a_terminal(sandbox: LocalSandbox) -> None:
    await sandbox.write_file(
        "inject.py",
        b"import fcntl, termios\n"
        b"try:\n"
        b"    fcntl.ioctl(0, termios.TIOCSTI, b'x')\n"
        b"    print('RESULT-injected')\n"
        b"except OSError as exc:\n"
        b"    print('RESULT-refused', exc.errno)\n"
        b"print('END-OF-TEST')\n",
    )
    session = await sandbox.open_pty(80, 24)
    try:
        await session.write(b"python3 inject.py\n")
        output = await read_pty_until(session, b"END-OF-TEST")
        assert b"RESULT-refused 1" in output  # EPERM from the seccomp filter
    finally:
        session.close()
