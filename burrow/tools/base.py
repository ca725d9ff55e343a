"""The seam between the agent loop and the things a model may ask for.

A tool gets a `ToolContext` that holds an explicit handle to the conversation's sandbox;
a tool reaches the machine only through it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from burrow.llm.base import ToolSpec
from burrow.sandbox.backend import Sandbox
from burrow.tools.output import LIVE_BYTES_PER_SECOND, LIVE_MAX_BYTES

OutputSink = Callable[[Literal["stdout", "stderr"], str], Awaitable[None]]


async def _discard(stream: Literal["stdout", "stderr"], text: str) -> None:
    return None


@dataclass(frozen=True)
class ToolKind:
    """What a tool may do, declared by the tool: the risk policy and the UI read these
    flags, never a list of tool names. No flag at all means "not declared" (judged as
    writing). The flags describe the tool itself; a tool with a `shell` argument also does
    whatever that command does, judged from the command on each call."""

    reads: bool = False  # looks at the workspace or the sandbox
    writes: bool = False  # changes files or starts processes in the sandbox
    destructive: bool = False  # may delete or overwrite a lot at once
    network: bool = False  # reaches beyond the sandbox
    shell: str | None = None  # the argument holding a shell command the tool runs
    # Runs a model loop of its own (a subagent): it may run alongside the other such calls
    # of one answer, and its time is not tool time (its own tools' time is).
    subloop: bool = False

    def as_event(self) -> dict[str, bool]:
        """The flags as `tool.started` carries them (`kind`: events.ToolKind) for the UI."""
        return {
            "reads": self.reads,
            "writes": self.writes,
            "destructive": self.destructive,
            "network": self.network,
            "shell": self.shell is not None,
        }


@dataclass
class ToolLimits:
    default_timeout: float = 120.0  # seconds, for bash when the model gives none
    max_timeout: float = 600.0
    output_head: int = 8_000  # characters of output the model sees from the start ...
    output_tail: int = 8_000  # ... and from the end, when the output is longer
    live_output_rate: int = LIVE_BYTES_PER_SECOND  # bytes/s of `tool.output` per call ...
    live_output_max: int = LIVE_MAX_BYTES  # ... and at most this many bytes per call
    read_lines: int = 2_000  # lines read_file returns when the model gives no limit
    read_chars: int = 50_000  # characters read_file returns at most in one call
    preview_timeout: float = 60.0  # seconds a preview service gets to accept connections


@dataclass
class ShellState:
    """State that outlives one tool call: the bash working directory, inside the sandbox."""

    cwd: str | None = None  # None = the workspace


@dataclass
class ToolContext:
    sandbox: Callable[[], Awaitable[Sandbox]]  # the conversation's sandbox, started on first use
    call_id: str
    shell: ShellState = field(default_factory=ShellState)
    limits: ToolLimits = field(default_factory=ToolLimits)
    on_output: OutputSink = _discard  # live stdout/stderr text for `tool.output` events
    conversation_id: str = ""  # whose sandbox this is (names its preview addresses)
    preview_url: Callable[[int], str] | None = None  # port -> the preview's address (no token)
    # The run is read-only (its mode): commands must run behind the sandbox's read-only
    # wall (ExecRequest.read_only), not on the strength of a rating.
    read_only: bool = False


@dataclass
class ToolResult:
    output: str  # what the model sees (already truncated)
    is_error: bool = False
    exit_code: int | None = None
    truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # tool-specific, e.g. preview url


class ToolError(Exception):
    """The call could not be carried out; the message is shown to the model and the user."""


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    @property
    def kind(self) -> ToolKind: ...

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult: ...
