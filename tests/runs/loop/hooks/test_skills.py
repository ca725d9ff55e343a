"""Skills: listed in the system prompt, loaded on demand by the `skill` tool, from the data
directory and from the workspace (through the sandbox: bounded, no escape)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.loop.hooks.skills import MAX_SKILL_BYTES, front_matter, listing, parse_skill
from tests.api.harness import RunningServer, running_server

SETUP = r"""
mkdir -p .burrow/skills/deploy .burrow/skills/big .burrow/skills/evil .burrow/skills/plain
printf -- '---\nname: deploy\ndescription: "How to deploy this app."\n---\n' \
  > .burrow/skills/deploy/SKILL.md
printf -- '# Deploy\nRun make deploy.\n' >> .burrow/skills/deploy/SKILL.md
printf -- '---\nname: big\ndescription: A very long skill.\n---\n' > .burrow/skills/big/SKILL.md
head -c 200000 /dev/zero | tr '\0' x >> .burrow/skills/big/SKILL.md
ln -s /etc/passwd .burrow/skills/evil/SKILL.md
ln -s /etc .burrow/skills/etc
echo 'no front matter here' > .burrow/skills/plain/SKILL.md
"""

OPS_GUIDE = """---
name: ops-guide
description: >
  What to check before
  touching production.
---
# Ops guide
Look at the dashboards first.
"""


def call(name: str) -> tuple[str, dict[str, Any]]:
    return ("skill", {"name": name})


def results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == "tool.finished"]


async def finish(srv: RunningServer, cid: str, content: str) -> None:
    run = await srv.send(cid, content)
    finished = await srv.run_finished(cid, run["run_id"])
    assert finished["data"]["status"] == "completed", finished


async def test_a_skill_is_listed_then_loaded_on_demand(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "skills" / "ops-guide").mkdir(parents=True)
    (data_dir / "skills" / "ops-guide" / "SKILL.md").write_text(OPS_GUIDE)
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": SETUP})]),
            ScriptedTurn(text="Skills written."),
            ScriptedTurn(tool_calls=[call("deploy"), call("ops-guide"), call("big")]),
            ScriptedTurn(tool_calls=[call("evil"), call("etc"), call("plain")]),
            ScriptedTurn(text="Done."),
        ]
    )
    async with running_server(data_dir, lambda: provider) as srv:
        cid = await srv.create_conversation()
        await finish(srv, cid, "write the skills")
        await finish(srv, cid, "use the skills")
        events = await srv.events(cid)

    # The run that wrote them found only the data directory's; the next lists the valid
    # ones, and only those.
    first, second = provider.requests[0][0].content, provider.requests[2][0].content
    assert "- ops-guide:" in first and "- deploy:" not in first
    assert "- deploy: How to deploy this app." in second
    assert "- ops-guide: What to check before touching production." in second
    assert "- big: A very long skill." in second
    for absent in ("evil", "etc", "plain", "no front matter"):
        assert f"- {absent}" not in second
    assert "skill" in {spec.name for spec in provider.tool_requests[2]}
    deploy, ops, big, evil, etc, plain = results(events)[1:]
    assert not deploy["is_error"] and "Run make deploy." in deploy["output"]
    assert not ops["is_error"] and "Look at the dashboards first." in ops["output"]
    # Bounded: the body is cut, and the model is told so.
    assert not big["is_error"] and f"longer than {MAX_SKILL_BYTES} bytes" in big["output"]
    assert len(big["output"]) < MAX_SKILL_BYTES + 200
    # A link out of the workspace, a linked folder, a file without front matter: unknown.
    for refused in (evil, etc, plain):
        assert refused["is_error"] and "No skill named" in refused["output"]
        assert "root:" not in refused["output"]


def test_front_matter_takes_flat_fields_quoted_or_folded() -> None:
    assert front_matter(OPS_GUIDE) == {
        "name": "ops-guide",
        "description": "What to check before touching production.",
    }
    assert front_matter("---\nname: 'x'\n---\n") == {"name": "x"}
    assert front_matter("no front matter") is None
    assert front_matter("---\nname: never closed\n") is None
    # Names are what Claude Code accepts: lowercase, digits, hyphens, at most 64.
    assert parse_skill("---\nname: Bad Name\ndescription: d\n---\n", "data", "p") is None
    assert parse_skill("---\nname: ok\n---\n", "data", "p") is None  # no description


def test_the_listing_is_bounded() -> None:
    many = [
        parse_skill(f"---\nname: s{i}\ndescription: {'d' * 500}\n---\n", "data", "p")
        for i in range(100)
    ]
    text = listing([s for s in many if s is not None])
    assert len(text) <= 8 * 1024 + 100
    assert "more skills are not listed" in text
