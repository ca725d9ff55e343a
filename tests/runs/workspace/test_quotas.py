"""The one per-owner count both caps use (runs/workspace/quotas.py's OwnerTally)."""

from __future__ import annotations

from burrow.runs.workspace.quotas import OwnerTally

OWNERS = {"c1": "ada", "c2": "ada", "c3": "bob"}


async def owner_of(cid: str) -> str | None:
    looked_up.append(cid)
    return OWNERS.get(cid)


looked_up: list[str] = []


async def test_owners_are_looked_up_once_and_holdings_counted_per_owner() -> None:
    looked_up.clear()
    tally = OwnerTally(owner_of)
    for cid in ("c1", "c2", "c3"):
        owner = await tally.owner(cid)
        assert owner is not None
        tally.hold(cid, owner)
    assert await tally.owner("c1") == "ada"
    assert looked_up == ["c1", "c2", "c3"]  # c1 not asked again: owners never change
    assert sorted(tally.held_by("ada")) == ["c1", "c2"]
    assert tally.held_by("ada", besides="c1") == ["c2"]
    tally.release("c2")
    assert tally.held_by("ada") == ["c1"]
    tally.forget("c1")
    assert tally.held_by("ada") == []
    await tally.owner("c1")
    assert looked_up[-1] == "c1"  # forgotten: looked up again


async def test_no_lookup_and_unknown_conversations_have_no_owner() -> None:
    assert await OwnerTally(None).owner("c1") is None
    looked_up.clear()
    tally = OwnerTally(owner_of)
    assert await tally.owner("gone") is None
    assert await tally.owner("gone") is None
    assert looked_up == ["gone", "gone"]  # a miss is not remembered
