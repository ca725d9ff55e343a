"""Model calls share one pooled connection per event loop (burrow/llm/http_pool.py): a
client per call cost ~30 ms of SSL set-up and a new connection every turn, most of a real
model's tool exit -> next request (bench/real_model_turn.py)."""

from __future__ import annotations

import asyncio

from burrow.llm.base import Message, ToolSpec
from burrow.llm.http_pool import shared_http
from burrow.llm.openai_compat import OpenAICompatProvider
from tests.fakes import FakeOpenAIServer, collect, text_reply, tool_call_reply

BASH = ToolSpec("bash", "Run a command", {"type": "object", "properties": {"command": {}}})


async def test_calls_of_providers_built_per_run_share_one_connection() -> None:
    with FakeOpenAIServer() as srv:
        srv.enqueue(
            tool_call_reply([("bash", {"command": "ls"})]), text_reply("a"), text_reply("b")
        )
        for _ in range(3):  # as each run builds its own provider
            provider = OpenAICompatProvider("fake-model", "k", srv.base_url)
            await collect(provider.stream([Message("user", "hi")], [BASH]))
        assert len(srv.clients) == 3 and len(set(srv.clients)) == 1, srv.clients
        # Sent as the wire JSON it was built as, without the SDK's re-walk of it.
        assert srv.requests[0] == {
            "model": "fake-model",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "description": "Run a command",
                        "parameters": BASH.parameters,
                    },
                }
            ],
            "stream_options": {"include_usage": True},
        }


async def test_each_event_loop_has_its_own_pool() -> None:
    here = shared_http()
    assert shared_http() is here
    elsewhere = await asyncio.to_thread(asyncio.run, _pool_of_a_new_loop())
    assert elsewhere is not here


async def _pool_of_a_new_loop() -> object:
    return shared_http()
