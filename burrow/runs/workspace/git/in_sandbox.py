"""Running git inside a sandbox (a conversation's, or a push's own): one exec, its output
collected.

Git always runs in a sandbox, never on the host: a clone or a push reaches the network
through the sandbox's egress fence like any command the agent runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from burrow.sandbox.backend import ExecChunk, ExecExit, ExecRequest, Sandbox, closing_exec

GIT_TIMEOUT = 600.0  # seconds; a large clone over a slow link
QUIET_ENV = {
    "GIT_TERMINAL_PROMPT": "0",  # no credential: fail, never wait for a keyboard
    "GIT_PAGER": "cat",
    "GIT_CONFIG_NOSYSTEM": "1",
    "LC_ALL": "C",  # git's messages in English, so they can be classified
}


@dataclass(frozen=True)
class GitResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def message(self) -> str:
        """What git said last, for an error: the end of stderr, else of stdout."""
        text = self.stderr.strip() or self.stdout.strip()
        if self.timed_out:
            return f"git took longer than {GIT_TIMEOUT:g} s and was stopped"
        lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
        return "\n".join(lines[-6:]) or f"git exited with {self.exit_code}"


async def run_git(
    sandbox: Sandbox,
    argv: list[str],
    env: Mapping[str, str] | None = None,
    *,
    on_stderr: Callable[[str], Awaitable[None]] | None = None,
) -> GitResult:
    """Run `argv` (git, or a shell script calling it) in the workspace and collect its output;
    `on_stderr` sees each piece of stderr as it comes (git's progress)."""
    request = ExecRequest(argv=argv, env={**QUIET_ENV, **(env or {})}, timeout=GIT_TIMEOUT)
    out, err = bytearray(), bytearray()
    exit_event = ExecExit(exit_code=None)
    async with closing_exec(sandbox.exec(request)) as events:
        async for event in events:
            if isinstance(event, ExecChunk):
                if event.stream == "stdout":
                    out += event.data
                else:
                    err += event.data
                    if on_stderr is not None:
                        await on_stderr(event.data.decode(errors="replace"))
            else:
                exit_event = event
    return GitResult(
        exit_event.exit_code,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
        exit_event.timed_out,
    )
