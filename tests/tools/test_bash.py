from __future__ import annotations

import asyncio

import pytest

from burrow.sandbox.local import LocalSandbox
from burrow.tools.base import ToolError, ToolLimits
from burrow.tools.bash import BashTool
from tests.sandbox.harness import sleeper, wait_for_no_processes
from tests.tools.harness import RecordingContext

bash = BashTool()


async def test_cd_persists_across_calls_without_showing_up_in_output(
    sandbox: LocalSandbox,
) -> None:
    recording = RecordingContext(sandbox)
    first = await bash.run({"command": "mkdir -p sub/inner && cd sub"}, recording.ctx)
    assert (first.output, first.is_error, first.exit_code) == ("(no output)", False, 0)
    second = await bash.run({"command": "pwd"}, recording.ctx)
    assert second.output == "/workspace/sub"
    assert recording.ctx.shell.cwd == "/workspace/sub"
    await bash.run({"command": "cd inner; exit 5"}, recording.ctx)
    assert recording.ctx.shell.cwd == "/workspace/sub/inner", "an EXIT trap records cwd"


async def test_cwd_follows_symlinks_physically(sandbox: LocalSandbox) -> None:
    recording = RecordingContext(sandbox)
    await bash.run({"command": "mkdir real && ln -s real alias && cd alias"}, recording.ctx)
    assert recording.ctx.shell.cwd == "/workspace/real"


async def test_a_deleted_cwd_falls_back_to_the_workspace(sandbox: LocalSandbox) -> None:
    recording = RecordingContext(sandbox)
    await bash.run({"command": "mkdir gone && cd gone"}, recording.ctx)
    await bash.run({"command": "rmdir /workspace/gone"}, recording.ctx)
    result = await bash.run({"command": "pwd"}, recording.ctx)
    assert "/workspace/gone no longer exists" in result.output
    assert "/workspace\n" in result.output or result.output.startswith("/workspace")


async def test_output_streams_live_and_combines_both_streams(sandbox: LocalSandbox) -> None:
    recording = RecordingContext(sandbox)
    result = await bash.run({"command": "echo out; sleep 0.1; echo err >&2"}, recording.ctx)
    assert result.output == "out\nerr"
    assert recording.chunks == [("stdout", "out\n"), ("stderr", "err\n")]


async def test_nonzero_exit_is_an_error_naming_the_code(sandbox: LocalSandbox) -> None:
    result = await bash.run({"command": "echo failing; exit 7"}, RecordingContext(sandbox).ctx)
    assert result.is_error
    assert result.exit_code == 7
    assert result.output == "failing\n\n[Exit code 7]"


async def test_long_output_keeps_head_and_tail_and_saves_the_full_log(
    sandbox: LocalSandbox,
) -> None:
    recording = RecordingContext(sandbox, ToolLimits(output_head=200, output_tail=100))
    result = await bash.run({"command": "seq 1 20000"}, recording.ctx)
    assert result.truncated and not result.is_error
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith("19999\n20000")
    assert ".burrow/outputs/call_1.log" in result.output
    assert "characters" in result.output and "omitted" in result.output
    assert len(result.output) < 1000
    log = (sandbox.workspace_dir / ".burrow/outputs/call_1.log").read_text()
    assert log == "".join(f"{n}\n" for n in range(1, 20001))


async def test_timeout_kills_the_process_group_and_says_so(sandbox: LocalSandbox) -> None:
    marker = "bash-timeout-5e1"
    recording = RecordingContext(sandbox)
    command = f"echo before; {sleeper(marker)} & {sleeper(marker)}"
    result = await bash.run({"command": command, "timeout": 0.5}, recording.ctx)
    assert result.is_error
    assert "Command timed out after 0.5 s" in result.output
    assert result.output.startswith("before")
    assert await wait_for_no_processes(sandbox, marker) == 0


async def test_cancellation_kills_the_command_and_propagates(sandbox: LocalSandbox) -> None:
    marker = "bash-cancel-0c7"
    recording = RecordingContext(sandbox)
    task = asyncio.create_task(
        bash.run({"command": f"echo started; {sleeper(marker)}"}, recording.ctx)
    )
    await recording.output_seen.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_for_no_processes(sandbox, marker) == 0


async def test_background_services_survive_the_call(sandbox: LocalSandbox) -> None:
    recording = RecordingContext(sandbox)
    started = await bash.run(
        {"command": "python3 -m http.server 8123 & echo started"}, recording.ctx
    )
    assert started.output == "started"
    fetch = await bash.run(
        {
            "command": 'for i in $(seq 50); do python3 -c "import urllib.request as u; '
            "print(u.urlopen('http://127.0.0.1:8123/').status)\" 2>/dev/null && break; "
            "sleep 0.1; done"
        },
        recording.ctx,
    )
    assert fetch.output == "200"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "'command' is required"),
        ({"command": 42}, "'command' must be a string"),
        ({"command": "ls", "timeout": "soon"}, "'timeout' must be a number"),
        ({"command": "ls", "timeout": -1}, "'timeout'"),
        ({"command": "   "}, "'command' is empty"),
    ],
)
async def test_invalid_arguments_are_precise_tool_errors(
    sandbox: LocalSandbox, arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        await bash.run(arguments, RecordingContext(sandbox).ctx)


ASKS_FOR_A_PASSWORD = r"""
cat > /tmp/auth.py <<'PY'
import http.server
class Ask(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Ask)
open("/tmp/auth.port", "w").write(str(server.server_port))
server.serve_forever()
PY
python3 /tmp/auth.py & while [ ! -s /tmp/auth.port ]; do sleep 0.05; done
git clone "http://127.0.0.1:$(cat /tmp/auth.port)/repo.git" /tmp/repo; echo "exit $?"
kill %1
"""


async def test_commands_that_would_wait_for_input_end_instead(sandbox: LocalSandbox) -> None:
    recording = RecordingContext(sandbox)
    started = asyncio.get_running_loop().time()
    read = await bash.run(
        {"command": "read x; echo got:$x; cat; echo cat ended", "timeout": 20}, recording.ctx
    )
    assert read.output == "got:\ncat ended"
    env = await bash.run(
        {"command": "echo $CI $GIT_TERMINAL_PROMPT $DEBIAN_FRONTEND $GIT_PAGER $PAGER"},
        recording.ctx,
    )
    assert env.output == "1 0 noninteractive cat cat"
    # A clone that needs a password fails at once rather than asking for one.
    clone = await bash.run({"command": ASKS_FOR_A_PASSWORD, "timeout": 30}, recording.ctx)
    assert "terminal prompts disabled" in clone.output and "exit 128" in clone.output
    assert asyncio.get_running_loop().time() - started < 15


async def test_a_same_second_same_size_edit_is_what_python_runs_next(sandbox: LocalSandbox) -> None:
    """Python's bytecode cache keys on mtime seconds and size: with a cache, the second run
    below prints 1 (the stale compiled module), so commands run without one."""
    recording = RecordingContext(sandbox)
    command = (
        "printf 'X = 1\\n' > m.py; touch -r m.py ref; python3 -c 'import m; print(m.X)'; "
        "printf 'X = 2\\n' > m.py; touch -r ref m.py; python3 -c 'import m; print(m.X)'; "
        "ls -d __pycache__ 2>/dev/null | wc -l"
    )
    result = await bash.run({"command": command}, recording.ctx)
    assert result.output == "1\n2\n0"
