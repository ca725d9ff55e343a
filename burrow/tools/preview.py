"""The `preview` tool: start a service in the background and open it in the user's preview.

The service runs in its own session inside the sandbox (it outlives the call, and a
second `preview` of the same port replaces it), its output goes to
`.burrow/services/<port>.log`, and it is recorded in `.burrow/services.json` so that it is
started again when a hibernated sandbox wakes up.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, Field

from burrow.llm.base import ToolSpec
from burrow.sandbox.backend import (
    ErrorCode,
    ExecExit,
    ExecRequest,
    Sandbox,
    SandboxError,
    closing_exec,
)
from burrow.tools.arguments import json_schema, parse_arguments
from burrow.tools.base import ToolContext, ToolError, ToolKind, ToolResult

SERVICES_FILE = ".burrow/services.json"
SERVICE_DIR = ".burrow/services"  # <port>.log (output), <port>.pid, <port>.exit
DEFAULT_PREVIEW_PORT = 8421  # `burrow serve`'s default preview listener (port + 1)
LOG_TAIL_CHARS = 4_000
POLL_SECONDS = (0.02, 0.05, 0.1, 0.2)  # growing waits between readiness checks

# Both scripts get $1 command, $2 log, $3 exit-status file, $4 pid file.
# STOP ends the port's earlier service (its whole process group: TERM, then KILL).
STOP = r"""
pidfile=$4
if [ -s "$pidfile" ]; then
  old=$(cat "$pidfile")
  if kill -TERM -- "-$old" 2>/dev/null; then
    for _ in $(seq 30); do kill -0 -- "-$old" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$old" 2>/dev/null
  fi
  rm -f "$pidfile"
fi
exit 0
"""
# START: setsid makes the service a session leader whose pid is its process group, so it
# outlives this exec and can be stopped as a group; its exit status lands in $3.
START = r"""
cmd=$1 log=$2 status=$3 pidfile=$4
mkdir -p "$(dirname "$log")" && rm -f "$status" || exit 1
setsid bash -c 'bash -c "$1"; echo $? > "$2"' burrow-service "$cmd" "$status" \
  > "$log" 2>&1 < /dev/null &
echo $! > "$pidfile"
"""


class PreviewArguments(BaseModel):
    command: str = Field(
        description="The command that starts the server, e.g. `npm run dev -- --host 0.0.0.0 "
        "--port 5173` or `python3 -m http.server 8000`. It runs in the background in the "
        "current directory; do not add `&`."
    )
    port: int = Field(ge=1, le=65535, description="The TCP port the server listens on.")


DESCRIPTION = """Start a web server in the background in the sandbox and show it to the user in
the live preview. Waits until the port accepts connections (returns the server's last output
if it does not), then returns the preview URL. Use this instead of bash for dev servers
(Vite, Next.js, Flask, http.server, ...); bind to 0.0.0.0 or localhost. Calling it again
for the same port restarts the server; its output is in .burrow/services/<port>.log."""


@dataclass(frozen=True)
class ServiceRecord:
    """One entry of `.burrow/services.json`."""

    port: int
    command: str
    cwd: str


async def read_services(sandbox: Sandbox) -> list[ServiceRecord]:
    """The recorded services; an absent or unreadable file is an empty list."""
    try:
        raw = json.loads(await sandbox.read_file(SERVICES_FILE))
    except (SandboxError, ValueError):
        return []
    records: list[ServiceRecord] = []
    for item in raw if isinstance(raw, list) else []:
        try:
            records.append(ServiceRecord(int(item["port"]), str(item["command"]), str(item["cwd"])))
        except (KeyError, TypeError, ValueError):
            continue
    return records


async def record_service(sandbox: Sandbox, record: ServiceRecord) -> None:
    """Add `record`, replacing an entry with the same port."""
    records = [r for r in await read_services(sandbox) if r.port != record.port] + [record]
    records.sort(key=lambda r: r.port)
    data = json.dumps([asdict(r) for r in records], indent=2) + "\n"
    await sandbox.write_file(SERVICES_FILE, data.encode())


# bash's /dev/tcp connects from inside the sandbox, for backends without a byte tunnel.
PORT_PROBE = 'exec 3<>"/dev/tcp/127.0.0.1/$1"'


async def port_accepts(sandbox: Sandbox, port: int) -> bool:
    """Whether something listens on `port` inside the sandbox: probed through its tunnel,
    or by a connect from inside where the backend has none (an HTTP-proxied remote one)."""
    try:
        _, writer = await sandbox.open_tunnel(port)
    except SandboxError as exc:
        if exc.code == ErrorCode.CONNECTION_REFUSED:
            return False
        if exc.code != ErrorCode.NOT_SUPPORTED:
            raise
        request = ExecRequest(argv=["bash", "-c", PORT_PROBE, "probe", str(port)], timeout=5)
        async with closing_exec(sandbox.exec(request)) as events:
            async for event in events:
                if isinstance(event, ExecExit):
                    return event.exit_code == 0
        return False
    writer.close()
    return True


def default_preview_url(conversation_id: str, port: int) -> str:
    return f"http://{port}-{conversation_id}.preview.localhost:{DEFAULT_PREVIEW_PORT}/"


class PreviewTool:
    spec = ToolSpec(
        name="preview", description=DESCRIPTION, parameters=json_schema(PreviewArguments)
    )
    # Starts a service (a write) from a command, which may itself be riskier.
    kind = ToolKind(reads=True, writes=True, shell="command")

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = parse_arguments(PreviewArguments, arguments, "preview")
        if not args.command.strip():
            raise ToolError("Invalid arguments for preview: 'command' is empty.")
        sandbox = await ctx.sandbox()
        cwd = ctx.shell.cwd or sandbox.workspace
        root = sandbox.workspace.rstrip("/")
        files = [f"{root}/{SERVICE_DIR}/{args.port}.{ext}" for ext in ("log", "exit", "pid")]
        await _script(sandbox, STOP, cwd, args.command, *files)
        if await port_accepts(sandbox, args.port):
            return ToolResult(
                output=f"Port {args.port} is already in use in the sandbox by a process the "
                "preview tool did not start. Stop that process or choose another port.",
                is_error=True,
            )
        await _script(sandbox, START, cwd, args.command, *files)
        failure = await _wait_until_listening(sandbox, args.port, ctx.limits.preview_timeout)
        log_name = f"{SERVICE_DIR}/{args.port}.log"
        tail = await _log_tail(sandbox, log_name)
        if failure is not None:
            await _script(sandbox, STOP, cwd, args.command, *files)
            shown = f"\n\nLast output ({log_name}):\n{tail}" if tail else "\n\n(no output)"
            return ToolResult(output=failure + shown, is_error=True)
        await record_service(sandbox, ServiceRecord(args.port, args.command, cwd))
        if ctx.preview_url is not None:
            url = ctx.preview_url(args.port)
        else:
            url = default_preview_url(ctx.conversation_id or "local", args.port)
        shown = f"\n\nOutput so far ({log_name}):\n{tail}" if tail else ""
        return ToolResult(
            # Read by the model and by the person in the tool card: true for both.
            output=f"Serving on port {args.port}, shown in the preview panel at {url}{shown}",
            extra={"preview": {"port": args.port, "url": url}},
        )


async def _script(sandbox: Sandbox, script: str, cwd: str, *args: str) -> None:
    request = ExecRequest(argv=["bash", "-c", script, "burrow-preview", *args], cwd=cwd, timeout=30)
    exit_event: ExecExit | None = None
    async with closing_exec(sandbox.exec(request)) as events:
        async for event in events:
            if isinstance(event, ExecExit):
                exit_event = event
    if exit_event is None or exit_event.exit_code != 0:
        raise ToolError(f"Could not start the service in {cwd} ({exit_event}).")


async def _wait_until_listening(sandbox: Sandbox, port: int, timeout: float) -> str | None:
    """None once the port accepts connections, else why it did not."""
    status_file = f"{SERVICE_DIR}/{port}.exit"
    deadline = time.monotonic() + timeout
    attempt = 0
    while True:
        if await port_accepts(sandbox, port):
            return None
        try:
            code = (await sandbox.read_file(status_file)).decode().strip()
        except SandboxError:
            code = ""
        if code:
            return f"The command exited (status {code}) without listening on port {port}."
        if time.monotonic() >= deadline:
            return (
                f"Nothing accepted connections on port {port} within {timeout:g} s; the "
                "service was stopped. Check that it listens on that port (and on 0.0.0.0 or "
                "localhost)."
            )
        await asyncio.sleep(POLL_SECONDS[min(attempt, len(POLL_SECONDS) - 1)])
        attempt += 1


async def _log_tail(sandbox: Sandbox, path: str) -> str:
    try:
        entry = await sandbox.stat(path)
        data = await sandbox.read_file(path, max(0, entry.size - LOG_TAIL_CHARS))
    except SandboxError:
        return ""
    return data.decode(errors="replace").strip()
