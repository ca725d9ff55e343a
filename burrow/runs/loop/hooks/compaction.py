"""Compaction: before a request would pass `compact_at` of the model's window, the model
summarizes the older turns.

What is kept: the user's own messages, verbatim; the most recent turns, whole (a tool call
is never separated from its result); in between, the summary. It is recorded as a
`context.compacted` event whose `upto_seq` says which events the summary replaces, and
`ModelContext` rebuilds the same context from that record, so a restarted server (or
another replica) sends exactly what this one would have.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from burrow.llm.base import Message, Pricer, Provider, TextDelta, Usage
from burrow.runs.journal import events as ev
from burrow.runs.loop.context import NOT_RUN, ModelContext
from burrow.runs.loop.hooks.base import Hook, Run
from burrow.runs.loop.window import CHARS_PER_TOKEN, estimate, estimate_message
from burrow.store.records import NewEvent

SUMMARY_PROMPT = """You compact the history of a coding agent's conversation so the agent \
can continue the work with less context. Write a summary of the transcript you are given \
for the agent itself: the user's goals and requests, decisions made, what was done (files \
created or changed, commands run and what they showed), errors met and how they were \
resolved, and what remains to do. Be specific: paths, names, numbers, commands. Do not \
address the user; write only the summary."""

TRANSCRIPT_SHARE = 0.5  # of the window, for the transcript sent to the summary call
SUMMARY_SHARE = 0.15  # of the room, at most, for the summary kept in the context
SUMMARY_TOKEN_SLACK = 1.25  # the summary call's bound over that share: tokenizers differ
MESSAGE_CHARS = 4_000  # of each message in the transcript (tool outputs: head and tail)


class NothingToCompact(Exception):
    """The context has no older turns to summarize (only the latest, or only the user's
    own messages)."""


@dataclass(frozen=True)
class CompactionPolicy:
    window: int  # tokens the model accepts
    compact_at: float = 0.8  # share of the window past which a request compacts first
    keep: float = 0.25  # share of the room the recent turns may keep whole
    turn: float = 0.5  # share of the room the latest turn may keep whole, if more than keep

    @property
    def threshold(self) -> int:
        return int(self.window * self.compact_at)

    def room(self, overhead: int) -> int:
        """What the conversation may fill: the window less the system prompt and tools
        sent with every request. Shares of the window alone would overfill a small one (a
        local model served with 2,048 tokens, ~1,300 of them Burrow's prompt and tools:
        the summary and the kept turns then made the context larger than it was)."""
        return max(self.window - overhead, self.window // 4)


def choose_cut(context: ModelContext, keep_tokens: float, turn_tokens: float) -> int:
    """Index of the first kept message: the oldest turn start (a user message) where what
    follows fits in `keep_tokens`, or the oldest point at all where it does; else the start
    of the latest turn if what follows fits in `turn_tokens`; else the latest point where
    a split is allowed."""
    messages = context.messages
    tail = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        tail[i] = tail[i + 1] + estimate_message(messages[i])
    # Only the user's messages and earlier summaries before a cut: nothing to summarize.
    first_other = next((i for i, m in enumerate(messages) if m.role != "user"), len(messages))
    useful = [i for i in context.cuts() if i > first_other]
    if not useful:
        raise NothingToCompact
    starts = [i for i in useful if messages[i].role == "user"]
    fitting = [i for i in starts if tail[i] <= keep_tokens] or [
        i for i in useful if tail[i] <= keep_tokens
    ]
    if fitting:
        return fitting[0]
    return ([i for i in starts if tail[i] <= turn_tokens] or useful)[-1]


def transcript(messages: Sequence[Message], budget_chars: int) -> str:
    """The older turns as plain text for the summary call, bounded: each message to
    `MESSAGE_CHARS`, the whole to `budget_chars` (its start and its end kept)."""
    parts = []
    for m in messages:
        text = m.content
        if m.role == "assistant" and m.tool_calls:
            calls = "; ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
            text = f"{text}\n[tool calls: {calls}]".strip()
        if m.role == "tool" and text == NOT_RUN:
            text = "(not run)"
        text = elide(text, MESSAGE_CHARS // 2, MESSAGE_CHARS // 2)
        label = f"tool {m.name}" if m.role == "tool" else m.role
        parts.append(f"## {label}\n{text}")
    first = budget_chars // 4  # the start holds the task and any earlier summary
    return elide("\n\n".join(parts), first, budget_chars - first)


def elide(text: str, head: int, tail: int) -> str:
    """`text` with all but its first `head` and last `tail` characters left out, said so."""
    if len(text) <= head + tail:
        return text
    left_out = len(text) - head - tail
    return f"{text[:head]}\n[… {left_out} characters left out …]\n{text[len(text) - tail :]}"


async def summarize(
    provider: Provider, messages: Sequence[Message], policy: CompactionPolicy, room: int
) -> tuple[str, Usage]:
    """The model's summary of `messages`, bounded to `SUMMARY_SHARE` of the `room`."""
    request = [
        Message(role="system", content=SUMMARY_PROMPT),
        Message(
            role="user",
            content=transcript(messages, int(policy.window * TRANSCRIPT_SHARE) * CHARS_PER_TOKEN),
        ),
    ]
    text: list[str] = []
    usage = Usage()
    # Bounded as it is cut below (with room for a tokenizer that counts more than chars/4):
    # an unbounded call wrote until the server's own limit, for text then thrown away.
    bound = max(64, int(room * SUMMARY_SHARE * SUMMARY_TOKEN_SLACK))
    stream = provider.stream(request, [], bound)
    async with contextlib.aclosing(stream):  # type: ignore[type-var]
        async for item in stream:
            if isinstance(item, TextDelta):
                text.append(item.text)
            elif isinstance(item, Usage):
                usage = item
    limit = int(room * SUMMARY_SHARE) * CHARS_PER_TOKEN
    summary = "".join(text).strip()
    if len(summary) > limit:
        summary = summary[:limit] + "\n[… summary cut to fit the context …]"
    return summary or "(the model gave an empty summary)", usage


async def compact(
    context: ModelContext,
    provider: Provider,
    policy: CompactionPolicy,
    pricing: Pricer,
    *,
    overhead: int,
    run_id: str | None,
    keep_tokens: float | None = None,
) -> tuple[list[NewEvent], Usage]:
    """The events that compact `context` (the summary call's usage, then context.compacted)
    and that usage, priced. `keep_tokens`: how much of the recent context may stay whole
    (default: `keep` of the room). Raises NothingToCompact, or the summary call's
    ModelError."""
    tokens_before = context.size(overhead)
    room = policy.room(overhead)
    if keep_tokens is None:
        keep_tokens = room * policy.keep
    cut = choose_cut(context, keep_tokens, room * policy.turn)
    upto_seq = max(context.origins[:cut])
    summary, usage = await summarize(provider, context.messages[:cut], policy, room)
    after = context.compacted(upto_seq, summary, context.last_seq + 1)
    tokens_after = overhead + estimate([m for m, _ in after])
    usage = usage.priced(pricing)
    return (
        [
            # compaction: the summary call's, not the size of the context
            ev.make(ev.UsageReported.of(usage, compaction=True), run_id),
            ev.make(
                ev.ContextCompacted(
                    tokens_before=tokens_before,
                    tokens_after=tokens_after,
                    summary=summary,
                    upto_seq=upto_seq,
                ),
                run_id,
            ),
        ],
        usage,
    )


class Compactor(Hook):
    """Compacts before a model call that would pass the threshold, and once more when
    the model still finds the context too long."""

    def __init__(self, provider: Provider, policy: CompactionPolicy, pricing: Pricer) -> None:
        self._provider = provider
        self._policy = policy
        self._pricing = pricing
        self._overhead: int | None = None  # system prompt, instructions and tools

    def overhead(self, run: Run) -> int:
        if self._overhead is None:  # constant within a run; measured once
            messages, specs = run.request()
            self._overhead = estimate(messages, specs) - run.context.estimated
        return self._overhead

    async def before_model_call(self, run: Run) -> None:
        if run.context.size(self.overhead(run)) > self._policy.threshold:
            with contextlib.suppress(NothingToCompact):
                await self._compact(run)

    async def context_too_long(self, run: Run) -> bool:
        # The rejected request shows the real window is smaller than its size, whatever
        # the catalog says (a self-hosted model may be served with a shorter one).
        size = run.context.size(self.overhead(run))
        try:
            await self._compact(run, replace(self._policy, window=min(self._policy.window, size)))
        except NothingToCompact:
            return False
        return True

    async def _compact(self, run: Run, policy: CompactionPolicy | None = None) -> None:
        events, usage = await compact(
            run.context,
            self._provider,
            policy or self._policy,
            self._pricing,
            overhead=self.overhead(run),
            run_id=run.run_id,
        )
        run.tally.usage += usage  # the summary call counts in the run's budget
        await run.emit(*events)
