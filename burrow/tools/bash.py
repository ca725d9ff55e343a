"""The `bash` tool: one command in the conversation's sandbox, cwd kept across calls."""

from __future__ import annotations

import asyncio
import codecs
import re
import signal
import uuid
from typing import Any

from pydantic import BaseModel, Field

from burrow.llm.base import ToolSpec
from burrow.sandbox.backend import (
    ErrorCode,
    ExecChunk,
    ExecExit,
    ExecRequest,
    Sandbox,
    SandboxError,
    closing_exec,
)
from burrow.tools.arguments import json_schema, parse_arguments
from burrow.tools.base import ToolContext, ToolError, ToolKind, ToolResult
from burrow.tools.output import LiveOutput, OutputBuffer, ReadPace

OUTPUT_LOG_DIR = ".burrow/outputs"


class BashArguments(BaseModel):
    command: str = Field(description="The bash command (or script) to run.")
    timeout: float | None = Field(
        default=None,
        gt=0,
        description="Seconds before the command and everything it started are killed.",
    )


DESCRIPTION = """Run a bash command in the sandbox and return its combined stdout and stderr.
The working directory starts at /workspace and persists between calls (`cd` sticks);
environment variables and shell functions do not. Long output is cut in the middle and
saved whole to a log file under .burrow/outputs/. Commands that never exit (servers,
watchers) must be started in the background, e.g. `python3 -m http.server 8000 > server.log
2>&1 &`; a command still running at its timeout is killed together with its children.
Nobody can type into a command: stdin is empty and CI=1, so pass flags such as `-y`."""


# Nobody can answer a prompt: stdin is /dev/null (ExecRequest's default) and the usual
# tools are told so, so a command that would ask ends instead of hanging to its timeout.
# The user's terminals are interactive and keep their own environment.
NON_INTERACTIVE = {
    "CI": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "DEBIAN_FRONTEND": "noninteractive",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    # Python's bytecode cache trusts a source's mtime in whole seconds and its size: an
    # agent that runs a module, then edits it within the same second to a same-sized text
    # (`a - b` -> `a + b`) would keep running the old code. No cache, and no __pycache__
    # noise in checkpoints and the Changes tab either.
    "PYTHONDONTWRITEBYTECODE": "1",
}


def _cwd_trap(result_file: str) -> str:
    # An EXIT trap also runs after `exit N`; `pwd -P` records the physical directory.
    return f"trap 'pwd -P > {result_file} 2>/dev/null' EXIT\n"


class BashTool:
    spec = ToolSpec(name="bash", description=DESCRIPTION, parameters=json_schema(BashArguments))
    kind = ToolKind(reads=True, shell="command")  # what else it does, its command decides

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = parse_arguments(BashArguments, arguments, "bash")
        if not args.command.strip():
            raise ToolError("Invalid arguments for bash: 'command' is empty.")
        timeout = min(args.timeout or ctx.limits.default_timeout, ctx.limits.max_timeout)
        sandbox = await ctx.sandbox()
        notes: list[str] = []
        cwd = ctx.shell.cwd or sandbox.workspace
        output = OutputBuffer(ctx.limits.output_head, ctx.limits.output_tail)
        live = LiveOutput(
            ctx.on_output, rate=ctx.limits.live_output_rate, limit=ctx.limits.live_output_max
        )
        try:
            exit_event = await _run(
                sandbox, args.command, cwd, timeout, output, live, ctx.read_only
            )
        except SandboxError as exc:
            if exc.code != ErrorCode.INVALID_CWD or ctx.shell.cwd is None:
                raise
            notes.append(f"[{cwd} no longer exists; the command ran in {sandbox.workspace}]")
            ctx.shell.cwd = None
            cwd = sandbox.workspace
            exit_event = await _run(
                sandbox, args.command, cwd, timeout, output, live, ctx.read_only
            )
        await live.finish()
        if exit_event.result:
            recorded = exit_event.result.decode(errors="replace").strip()
            if recorded.startswith("/"):
                ctx.shell.cwd = cwd = recorded

        log_path = None
        if output.truncated:
            log_path = f"{OUTPUT_LOG_DIR}/{_safe_name(ctx.call_id)}.log"
            try:
                await sandbox.write_file(log_path, output.full_text().encode())
            except SandboxError:
                log_path = None
        text = output.for_model(log_path)
        is_error = exit_event.timed_out or exit_event.exit_code != 0
        if exit_event.timed_out:
            notes.append(
                f"Command timed out after {timeout:g} s; it was killed with everything it "
                "started. Run long-lived programs in the background (`cmd > log 2>&1 &`)."
            )
        elif exit_event.signal is not None:
            notes.append(f"[Command killed by signal {_signal_name(exit_event.signal)}]")
        elif exit_event.exit_code != 0:
            notes.append(f"[Exit code {exit_event.exit_code}]")
        if not text and not notes:
            text = "(no output)"
        parts = [text.rstrip("\n")] if text else []
        return ToolResult(
            output="\n\n".join(parts + notes),
            is_error=is_error,
            exit_code=exit_event.exit_code,
            truncated=output.truncated,
            extra={"cwd": cwd, "log_path": log_path, "timed_out": exit_event.timed_out},
        )


async def _run(
    sandbox: Sandbox,
    command: str,
    cwd: str,
    timeout: float,
    output: OutputBuffer,
    live: LiveOutput,
    read_only: bool = False,
) -> ExecExit:
    """Stream the command's output to `output` and `live`; return its exit."""
    result_file = f"/tmp/.burrow-cwd-{uuid.uuid4().hex}"
    request = ExecRequest(
        argv=["bash", "-c", _cwd_trap(result_file) + command],
        cwd=cwd,
        env=NON_INTERACTIVE,
        timeout=timeout,
        result_file=result_file,
        read_only=read_only,
    )
    decoders = {
        "stdout": codecs.getincrementaldecoder("utf-8")(errors="replace"),
        "stderr": codecs.getincrementaldecoder("utf-8")(errors="replace"),
    }
    exit_event: ExecExit | None = None
    pace = ReadPace()
    # aclosing: on cancellation (a user interrupt) the stream is closed at once, which kills
    # the command's process group; the CancelledError then propagates to the caller.
    async with closing_exec(sandbox.exec(request)) as events:
        async for event in events:
            if isinstance(event, ExecChunk):
                text = decoders[event.stream].decode(event.data)
                if text:
                    output.add(text)
                    await live.add(event.stream, text)
                # Buffered output is read without suspending: let other requests in between,
                # and past a flood's first megabytes, read no faster than the pace.
                await asyncio.sleep(pace.delay(len(event.data)))
            else:
                exit_event = event
    for stream, decoder in decoders.items():
        rest = decoder.decode(b"", final=True)
        if rest:
            output.add(rest)
            await live.add(stream, rest)  # type: ignore[arg-type]
    if exit_event is None:
        raise SandboxError(ErrorCode.PROTOCOL, "the command's output ended without an exit")
    return exit_event


def _safe_name(call_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", call_id)[:100] or uuid.uuid4().hex


def _signal_name(number: int) -> str:
    try:
        return f"{number} ({signal.Signals(number).name})"
    except ValueError:
        return str(number)
