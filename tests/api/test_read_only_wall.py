"""read_only mode is a wall, not a rating: whatever the risk classifier lets through runs
behind the sandbox's read-only restriction (agent/landlock.py), so the workspace is byte
for byte what it was. The commands are the ones the hardening review found rated safe."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.sandbox.local import LocalBackend
from tests.api.harness import running_server
from tests.sandbox.harness import run

SETUP = (
    "git init -q -b main && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m one"
    " && git branch feature && "
    "printf 'b\\na\\n' > f && mkdir -p dir && echo keep > dir/k"
)
ATTEMPTS = [
    "env touch x",
    "sort -o f f",
    "git branch -D feature; git branch -m main other; git remote add evil https://example.com/x",
    "python3 -c \"open('dir/k', 'w').write('owned')\"",
    "find . -name k -delete",
    "tee dir/k < /dev/null",
    "ls > listing.txt",
]


def tree_digest(root: Path) -> dict[str, str]:
    """Every path under the workspace with its content's hash (links by target), but
    Burrow's own `.burrow/` (the run's checkpoint is written there, outside the wall)."""
    seen = {}
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        if relative.split("/")[0] == ".burrow":
            continue
        if path.is_symlink():
            seen[relative] = "-> " + str(path.readlink())
        elif path.is_file():
            seen[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            seen[relative] = "dir"
    return seen


def results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == "tool.finished"]


async def test_what_read_only_lets_run_changes_nothing(tmp_path: Path) -> None:
    turns = [ScriptedTurn(tool_calls=[("bash", {"command": c})]) for c in ATTEMPTS]
    provider = ScriptedProvider([*turns, ScriptedTurn(text="Looked.")])
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        assert (await run(sandbox, "sh", "-c", SETUP)).exit.exit_code == 0
        backend = srv.services.runtime.sandboxes.backend
        assert isinstance(backend, LocalBackend)
        workspace = backend.workspace_dir(cid)
        before = tree_digest(workspace)
        await srv.client.patch(f"/api/conversations/{cid}", json={"approval_mode": "read_only"})
        started = await srv.send(cid, "have a look")
        await srv.run_finished(cid, started["run_id"])
        finished = results(await srv.events(cid))
        assert len(finished) == len(ATTEMPTS)
        assert tree_digest(workspace) == before
        allowed = [r for r in finished if "Refused" not in r["output"]]
        assert allowed, "the classifier refused everything: nothing reached the wall"
        for result in allowed:
            assert result["is_error"], result
        # The wall is the run's, not the sandbox's: the owner's own command still writes.
        wrote = await run(sandbox, "sh", "-c", "echo mine > mine.txt && cat mine.txt")
        assert wrote.text == "mine\n"
        walled = "echo ok > /tmp/scratch && cat /tmp/scratch && touch y"
        inside = await run(sandbox, "sh", "-c", walled, read_only=True)
        assert inside.text == "ok\n" and inside.exit.exit_code != 0  # temporary files only
        assert "y" not in tree_digest(workspace)
