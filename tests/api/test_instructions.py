"""The workspace's AGENTS.md joins the system prompt at each run's start, read through the
real sandbox; hostile files (huge, binary, a symlink out, a FIFO) cannot hurt the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.loop.hooks.instructions import HEADER, MAX_INSTRUCTIONS_BYTES
from burrow.sandbox.backend import ExecExit, ExecRequest
from tests.api.harness import RunningServer, running_server

provider = ScriptedProvider([ScriptedTurn(text="ok")], turn_from_context=True)


async def prepare(srv: RunningServer, *, data: bytes = b"", shell: str = "") -> str:
    """A conversation whose workspace holds AGENTS.md as given, made in its sandbox."""
    cid = await srv.create_conversation()
    sandbox = await srv.services.runtime.sandboxes.get(cid)
    if data:
        await sandbox.write_file("AGENTS.md", data)
    if shell:
        async for item in sandbox.exec(ExecRequest(argv=["sh", "-c", shell])):
            if isinstance(item, ExecExit):
                assert item.exit_code == 0, item
    return cid


async def ask(srv: RunningServer, cid: str) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt the model got for a new message, and the run's events."""
    run = await srv.send(cid, "hello")
    finished = await srv.run_finished(cid, run["run_id"], timeout=20)
    assert finished["data"]["status"] == "completed", finished
    events = [e for e in await srv.events(cid) if e["run_id"] == run["run_id"]]
    system = provider.requests[-1][0]
    assert system.role == "system"
    return system.content, events


def loaded(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == "instructions.loaded"]


async def test_agents_md_is_added_to_the_system_prompt_and_shown(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await prepare(srv, data="Always run `make check` before you finish. ✓\n".encode())
        system, events = await ask(srv, cid)
        assert system.endswith(f"{HEADER}\n\nAlways run `make check` before you finish. ✓")
        [data] = loaded(events)
        assert data["path"] == "AGENTS.md" and data["truncated"] is False
        types = [e["type"] for e in events]
        assert types.index("instructions.loaded") < types.index("assistant.message")

        # Read again at the next run's start: an edit between runs is seen.
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        await sandbox.write_file("AGENTS.md", b"Use tabs.")
        system, events = await ask(srv, cid)
        assert system.endswith("Use tabs.") and "make check" not in system
        assert len(loaded(events)) == 1

        without = await prepare(srv)
        system, events = await ask(srv, without)
        assert HEADER not in system and not loaded(events)


async def test_hostile_agents_md_files_are_bounded_or_ignored(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: provider) as srv:
        huge = await prepare(srv, data=b"a" * (MAX_INSTRUCTIONS_BYTES * 4))
        system, events = await ask(srv, huge)
        assert system.count("a" * 1000) >= 32 and "a" * (MAX_INSTRUCTIONS_BYTES + 1) not in system
        assert "longer than 32768 bytes" in system
        assert loaded(events) == [{"path": "AGENTS.md", "bytes": 32768, "truncated": True}]

        # A multi-byte character cut at the limit is dropped, not an error.
        cut = await prepare(srv, data=b"b" * (MAX_INSTRUCTIONS_BYTES - 1) + "é".encode() * 10)
        system, events = await ask(srv, cut)
        assert loaded(events)[0]["truncated"] is True and "b" * 1000 in system

        for name, kwargs in [
            ("binary", {"data": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8}),
            ("not utf-8", {"data": b"caf\xe9 au lait"}),
            ("symlink out", {"shell": "ln -s /etc/shadow AGENTS.md"}),
            ("symlink to a directory", {"shell": "ln -s / AGENTS.md"}),
            ("fifo", {"shell": "mkfifo AGENTS.md"}),  # reading it would block forever
            ("directory", {"shell": "mkdir AGENTS.md"}),
        ]:
            cid = await prepare(srv, **kwargs)  # type: ignore[arg-type]
            system, events = await ask(srv, cid)
            assert HEADER not in system, name
            assert not loaded(events), name
            assert "root:" not in system, name
