"""MaskedProvider: the whole request masked on its way to the provider, as a function."""

from __future__ import annotations

import time

from burrow.llm.base import (
    Done,
    Message,
    ScriptedTurn,
    TextDelta,
    ThinkingBlock,
    ToolCall,
    ToolSpec,
)
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.loop.masked_requests import MaskedProvider, MaskSource
from burrow.sandbox.masking import SecretMask

VALUE = "sk-live-0123456789abcdef"
KEY = "-----BEGIN KEY-----\nabc\n-----END KEY-----"


async def _mask() -> SecretMask:
    return SecretMask([VALUE])


async def _none() -> SecretMask:
    return SecretMask()


async def test_every_text_of_the_request_is_masked_and_opaque_data_is_not() -> None:
    inner = ScriptedProvider([ScriptedTurn(text=f"the answer names {VALUE}")])
    messages = [
        Message("system", f"AGENTS.md: deploy with {VALUE}"),
        Message("user", f"use {VALUE}"),
        Message(
            "assistant",
            f"said {VALUE}",
            thinking=f"thought {VALUE}",
            tool_calls=(ToolCall("c1", "bash", f'{{"command": "echo {VALUE}"}}'),),
            thinking_blocks=(ThinkingBlock(f"block {VALUE}", signature="sig-" + VALUE),),
        ),
        Message("tool", f"printed {VALUE}", tool_call_id="c1", name="bash"),
    ]
    tools = [
        ToolSpec(
            "mcp__s__t",
            f"Uses {VALUE}",
            {"type": "object", "properties": {VALUE: {"description": VALUE}}},
        )
    ]
    events = [e async for e in MaskedProvider(inner, _mask).stream(messages, tools)]
    [sent], [offered] = inner.requests, inner.tool_requests
    assert VALUE not in repr([m for m in sent if not m.thinking_blocks])
    assert [m.content for m in sent] == [
        "AGENTS.md: deploy with ****",
        "use ****",
        "said ****",
        "printed ****",
    ]
    assert sent[2].thinking == "thought ****"
    assert sent[2].tool_calls[0].arguments == '{"command": "echo ****"}'
    # A signature is the provider's own opaque data, sent back as it came.
    assert sent[2].thinking_blocks == (ThinkingBlock("block ****", signature="sig-" + VALUE),)
    assert offered == [
        ToolSpec(
            "mcp__s__t",
            "Uses ****",
            {"type": "object", "properties": {"****": {"description": "****"}}},
        )
    ]
    # The answer is the provider's: masking it is the journal's job, not this one's.
    assert VALUE in "".join(e.text for e in events if isinstance(e, TextDelta))
    assert isinstance(events[-1], Done)


async def test_without_secrets_the_request_passes_as_it_is() -> None:
    inner = ScriptedProvider([ScriptedTurn(text="ok")])
    messages = [Message("user", "hello")]
    tools = [ToolSpec("bash", "Run a command", {"type": "object"})]
    [_ async for _ in MaskedProvider(inner, _none).stream(messages, tools)]
    assert inner.requests[0][0] is messages[0] and inner.tool_requests[0][0] is tools[0]


async def test_masking_a_long_context_costs_little() -> None:
    """200 messages of 2 KB with three secrets: a request that repeats the context (every
    step does) adds well under a millisecond, measured against the same provider without
    secrets; each message is masked once, also when the mask is rebuilt with equal values
    (as it is before every command)."""
    messages = [Message("user" if i % 2 else "assistant", "word " * 400) for i in range(200)]

    async def source() -> SecretMask:
        return SecretMask([VALUE, "ghp_" + "x" * 36, KEY])  # a fresh, equal mask each time

    async def per_request(masks: MaskSource) -> float:
        provider = MaskedProvider(ScriptedProvider([ScriptedTurn(text="ok")] * 50), masks)
        start = time.perf_counter()
        for _ in range(50):
            [_ async for _ in provider.stream(messages, [])]
        return (time.perf_counter() - start) / 50

    # The best of five, interleaved: a busy machine (the rest of the suite beside it) slows
    # some rounds of either, never makes one faster than the work takes.
    masked, bare = [], []
    for _ in range(5):
        masked.append(await per_request(source))
        bare.append(await per_request(_none))
    added = min(masked) - min(bare)
    print(f"masking a request of 200 x 2 KB messages, 3 secrets: {added * 1000:.3f} ms")
    assert added < 0.002
