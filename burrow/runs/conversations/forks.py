"""Fork a conversation at a run: a new conversation with the journal before that run's
user message and the workspace as that run found it (its starting checkpoint).

Without a run, the fork is of the conversation as it is now; that is refused while a run
changes it (`RunActive`), where a fork at a past run is not: that run's checkpoint and the
journal before it no longer change. The workspace crosses as a git bundle of the
checkpoint, written in the source's sandbox, copied in chunks into the fork's sandbox and
unbundled there into the fork's own checkpoint store, so neither conversation's files or
store are ever shared. Checkpoints leave out `.git` folders and files over
BURROW_CHECKPOINT_MAX_FILE_MB: so does a fork. What the source installed into its system
(its writable root's layer) is copied as it is now, at whatever run the fork is.
"""

from __future__ import annotations

import secrets

from burrow.runs.conversations.runtime import RunActive, Runtime
from burrow.runs.journal.closing import ending
from burrow.runs.journal.journal import projection_change
from burrow.runs.workspace.between_sandboxes import copy_file, run_in
from burrow.runs.workspace.checkpoints import STORE
from burrow.store.forks import ForkStore
from burrow.store.records import Conversation, NewEvent

FORKED = "The conversation was forked while this was open."


class RunNotFound(LookupError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"Run {run_id} is not in this conversation.")


class NoCheckpoint(LookupError):
    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"Run {run_id} has no starting checkpoint (it had not reached its first model "
            "call, or its checkpoint was pruned past BURROW_CHECKPOINT_MAX_COUNT / "
            "BURROW_CHECKPOINT_MAX_BYTES): fork at a later run, or without a run."
        )


async def fork(runtime: Runtime, store: ForkStore, source: Conversation, run_id: str | None) -> str:
    """The new conversation's id."""
    journal = await runtime.journal.read(source.id)
    if run_id is None:
        if await runtime.busy(source.id):
            raise RunActive(source.id)
        checkpoint = "now"
    else:
        cut = next((i for i, e in enumerate(journal) if e.run_id == run_id), None)
        if cut is None:
            raise RunNotFound(run_id)
        journal = journal[:cut]
        starting = [c for c in await runtime.checkpoints.list(source.id) if c.run_id == run_id]
        if not starting:
            raise NoCheckpoint(run_id)
        checkpoint = starting[0].id
    _, closing = ending(journal, FORKED)  # a fork's journal is a finished one
    usage = projection_change([NewEvent(e.type, e.data, e.run_id) for e in journal])
    cid = await store.copy(source.id, f"{source.title} (fork)", journal, usage)
    try:
        if closing:
            await runtime.journal.append(cid, *closing)
        # What it installed, as it is now: checkpoints cover /workspace only.
        await runtime.sandboxes.copy_root(source.id, cid)
        # The earlier runs' checkpoints go along: an Edit (a fork at one of them) or a
        # restore in the fork works as in its source.
        runs = {e.run_id for e in journal if e.run_id}
        carried = [c.id for c in await runtime.checkpoints.list(source.id) if c.run_id in runs]
        await _copy_workspace(runtime, source.id, checkpoint, cid, carried)
    except BaseException:
        await runtime.delete(cid)
        raise
    return cid


async def _copy_workspace(
    runtime: Runtime, source: str, checkpoint: str, target: str, carried: list[str]
) -> None:
    name = f"{STORE}/fork-{secrets.token_hex(8)}.bundle"
    origin = await runtime.sandboxes.get(source)
    what = "Copying the workspace into the fork"
    try:
        await runtime.checkpoints.export(source, checkpoint, f"{origin.workspace}/{name}", carried)
        copy = await runtime.sandboxes.get(target)
        path = f"{copy.workspace}/{name}"
        await copy_file(origin, name, copy, path, what=what)
        await runtime.checkpoints.import_bundle(target, path)
    finally:
        await run_in(origin, 'rm -f "$1"', f"{origin.workspace}/{name}", what=what)
