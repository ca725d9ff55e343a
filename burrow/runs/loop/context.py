"""The model context as a projection of the journal.

Rebuilding from events (not from a separate transcript) is what lets a restarted server,
or another replica, continue a conversation exactly where it was.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from burrow.llm.base import Message, ThinkingBlock, ToolCall
from burrow.runs.journal import events as ev
from burrow.runs.journal.events import EventType
from burrow.runs.loop.window import estimate_message
from burrow.store.records import Event

NOT_RUN = "(not run: the run ended before this tool call was carried out)"
SUMMARY_HEADER = (
    "[Burrow compacted the earlier part of this conversation to fit the model's context. "
    "The user's messages above are verbatim; this summary replaces the turns between them.]"
)


def arguments_json(arguments: Any) -> str:
    """Tool-call arguments as the model should see them again in its history."""
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    # Invalid JSON the model once produced: servers reject it in history, and the tool
    # result already tells the model what was wrong.
    return "{}"


def thinking_blocks_data(blocks: list[ThinkingBlock]) -> list[ev.ThinkingBlock] | None:
    """The `thinking_blocks` field of `assistant.message` (absent when there are none)."""
    if not blocks:
        return None
    return [
        ev.ThinkingBlock(type="redacted_thinking", data=b.redacted)
        if b.redacted
        else ev.ThinkingBlock(type="thinking", thinking=b.text, signature=b.signature)
        for b in blocks
    ]


def thinking_blocks_of(data: dict[str, Any]) -> tuple[ThinkingBlock, ...]:
    return tuple(
        ThinkingBlock(redacted=str(b.get("data", "")))
        if b.get("type") == "redacted_thinking"
        else ThinkingBlock(str(b.get("thinking", "")), str(b.get("signature", "")))
        for b in data.get("thinking_blocks") or []
    )


def file_saved_note(path: str) -> str:
    """What the model is told when the user saved a file in the editor: its copy of the
    file (from an earlier read) may be stale."""
    return (
        f"[Burrow: the user edited and saved {path} in the file editor. Read it again "
        "before changing it.]"
    )


def summary_message(summary: str) -> Message:
    return Message(role="user", content=f"{SUMMARY_HEADER}\n\n{summary}")


@dataclass
class ModelContext:
    """One agent's view of the journal: the run's (`scope` None) or a subagent's (`scope`
    = its `task` call id). Each leaves out the other's events: a subagent's turns are not
    the parent's, only its report (the `task` call's result) is."""

    messages: list[Message] = field(default_factory=list)
    origins: list[int] = field(default_factory=list)  # per message: the seq of its event
    last_seq: int = 0
    user_messages: int = 0  # how many user messages have been seen, for steering checks
    estimated: int = 0  # tokens of `messages` by estimate (runs/loop/window.py)
    # The size the provider last reported (prompt + completion tokens of the last answer)
    # and `estimated` then; None when nothing was reported since the last compaction.
    reported: tuple[int, int] | None = None
    _summaries: set[int] = field(default_factory=set)  # origins of summary messages
    _pending_calls: dict[str, str] = field(default_factory=dict)  # call_id -> tool name
    _deferred: list[tuple[Message, int]] = field(default_factory=list)
    scope: str | None = None

    def apply(self, event: Event) -> None:
        if event.seq <= self.last_seq:
            return
        self.last_seq = event.seq
        data = event.data
        if data.get("parent_call_id") != self.scope:
            return
        if event.type == EventType.USER_MESSAGE:
            self.user_messages += 1
            message = Message(
                role="user",
                content=str(data.get("content", "")),
                attachments=tuple(str(p) for p in data.get("attachments") or ()),
            )
            if self._pending_calls:
                # Steering that arrived while tools ran goes after their results: the
                # chat format wants tool results right after the assistant's calls.
                self._deferred.append((message, event.seq))
            else:
                self._add(message, event.seq)
        elif event.type == EventType.USAGE:
            tokens = ev.Usage.read(data).tokens
            # Only an answer's usage says how big the context is, not a summary call's.
            if tokens and not data.get("compaction"):
                self.reported = (tokens, self.estimated)
        elif event.type == EventType.CONTEXT_COMPACTED:
            self._compact(int(data.get("upto_seq") or 0), str(data.get("summary", "")), event.seq)
        elif event.type == EventType.ASSISTANT_MESSAGE:
            self._close_pending(event.seq)
            calls = tuple(
                ToolCall(id=c["id"], name=c["name"], arguments=arguments_json(c["arguments"]))
                for c in data.get("tool_calls") or []
            )
            self._add(
                Message(
                    role="assistant",
                    content=str(data.get("content") or ""),
                    thinking=str(data.get("thinking") or ""),
                    tool_calls=calls,
                    thinking_blocks=thinking_blocks_of(data),
                ),
                event.seq,
            )
            self._pending_calls = {c.id: c.name for c in calls}
        elif event.type == EventType.TOOL_FINISHED:
            call_id = str(data.get("call_id"))
            name = self._pending_calls.pop(call_id, None)
            if name is not None:
                self._add(
                    Message(
                        role="tool",
                        content=str(data.get("output", "")),
                        tool_call_id=call_id,
                        name=name,
                    ),
                    event.seq,
                )
                if not self._pending_calls:
                    self._flush_deferred()
        elif event.type == EventType.RUN_FINISHED:
            self._close_pending(event.seq)
        elif event.type == EventType.FILE_SAVED:
            note = Message(role="user", content=file_saved_note(str(data.get("path", ""))))
            if self._pending_calls:  # like steering: after the results of the calls
                self._deferred.append((note, event.seq))
            else:
                self._add(note, event.seq)

    def open_with(self, prompt: str) -> None:
        """A subagent's context begins with its task (the `task` call carries it)."""
        self.user_messages += 1
        self._add(Message(role="user", content=prompt), self.last_seq)

    def size(self, overhead: int) -> int:
        """Tokens of the next request: the last reported size plus an estimate of what
        came after it; with no report, all estimated plus `overhead` (the system prompt and
        tools, which a report includes)."""
        if self.reported is not None:
            tokens, then = self.reported
            return tokens + self.estimated - then
        return overhead + self.estimated

    def cuts(self) -> list[int]:
        """Indexes where the context may be split into summarized and kept: before a
        message that is not a tool result, with every earlier message from earlier events
        (so a call and its result, or steering deferred past them, stay on one side)."""
        found = []
        highest = 0
        lowest_after = [0] * (len(self.origins) + 1)
        lowest_after[-1] = self.last_seq + 1
        for i in range(len(self.origins) - 1, -1, -1):
            lowest_after[i] = min(self.origins[i], lowest_after[i + 1])
        for i, message in enumerate(self.messages):
            if i and message.role != "tool" and highest < lowest_after[i]:
                found.append(i)
            highest = max(highest, self.origins[i])
        return found

    def compacted(self, upto_seq: int, summary: str, seq: int) -> list[tuple[Message, int]]:
        """(message, origin) after a compaction record: the messages from events up to
        `upto_seq` become the user's own messages (verbatim) and the summary; later stay."""
        kept: list[tuple[Message, int]] = []
        older: list[tuple[Message, int]] = []
        for message, origin in zip(self.messages, self.origins, strict=True):
            if origin > upto_seq:
                kept.append((message, origin))
            elif message.role == "user" and origin not in self._summaries:
                older.append((message, origin))  # an earlier summary is summarized again
        return [*older, (summary_message(summary), seq), *kept]

    def _compact(self, upto_seq: int, summary: str, seq: int) -> None:
        self._close_pending(seq)
        after = self.compacted(upto_seq, summary, seq)
        self.messages, self.origins, self.estimated = [], [], 0
        self._summaries = {seq}
        for message, origin in after:
            self._add(message, origin)
        self.reported = None  # measured again by the next answer

    def _add(self, message: Message, origin: int) -> None:
        self.messages.append(message)
        self.origins.append(origin)
        self.estimated += estimate_message(message)

    def _close_pending(self, seq: int) -> None:
        for call_id, name in self._pending_calls.items():
            self._add(Message(role="tool", content=NOT_RUN, tool_call_id=call_id, name=name), seq)
        self._pending_calls = {}
        self._flush_deferred()

    def _flush_deferred(self) -> None:
        for message, origin in self._deferred:
            self._add(message, origin)
        self._deferred = []
