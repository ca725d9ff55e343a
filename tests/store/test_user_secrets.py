"""Users' secrets at rest, on SQLite and PostgreSQL: sealed, per owner, and deleting one
unselects it in its owner's conversations only."""

from __future__ import annotations

import sqlalchemy as sa
from cryptography.fernet import Fernet

from burrow.runs.conversations.secrets import ConversationSecrets, MaskingEventStore
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.records import NewEvent, ProjectionChange
from burrow.store.schema import user_secrets
from burrow.store.secrets import Redactor, SecretBox
from burrow.store.user_secrets import UserSecretStore

VALUE = "value-of-A_B-0123456789"


async def test_sealed_per_owner_and_deleting_unselects(engine: Database) -> None:
    box = SecretBox(Fernet.generate_key())
    store = UserSecretStore(engine, box)
    accounts, conversations = AccountStore(engine), ConversationStore(engine)
    alice, bob = await accounts.get_or_create("alice"), await accounts.get_or_create("bob")
    await store.put(alice.id, "A_B", VALUE)
    await store.put(alice.id, "AXB", "other-value-of-alice")  # LIKE's _ would match it
    await store.put(bob.id, "A_B", "bobs-value-1234")
    mine = await conversations.create(alice.id, "a")
    theirs = await conversations.create(bob.id, "b")
    await conversations.update(mine.id, secrets=["AXB", "A_B", "A_B"])
    await conversations.update(theirs.id, secrets=["A_B"])

    assert [s.name for s in await store.names(alice.id)] == ["AXB", "A_B"]
    assert (await store.values(alice.id))["A_B"] == VALUE
    assert (await store.values(bob.id)) == {"A_B": "bobs-value-1234"}
    stored = await engine.run(lambda c: [r.value for r in c.execute(sa.select(user_secrets))])
    assert all(VALUE not in v and "bobs" not in v for v in stored)

    assert await store.delete(alice.id, "A_B")
    assert not await store.delete(alice.id, "A_B")
    after = await conversations.get(mine.id)
    assert after is not None and after.secrets == ("AXB",)
    other = await conversations.get(theirs.id)
    assert other is not None and other.secrets == ("A_B",)  # bob's choice is his own


async def test_the_journal_masks_every_string_of_the_owners_conversations(
    engine: Database,
) -> None:
    box = SecretBox(Fernet.generate_key())
    conversations = ConversationStore(engine)
    alice = await AccountStore(engine).get_or_create("alice")
    bob = await AccountStore(engine).get_or_create("bob")
    secrets = ConversationSecrets(UserSecretStore(engine, box))
    events = MaskingEventStore(engine, Redactor(), secrets)
    mine = await conversations.create(alice.id, "a")
    theirs = await conversations.create(bob.id, "b")
    # Cached before the secret exists: setting it must refresh the conversation's mask.
    await events.append(mine.id, [NewEvent("user.message", {"content": "hi"})], ProjectionChange())
    await secrets.put(alice.id, "TOKEN", VALUE)

    data = {"content": f"x{VALUE}y", "tool_calls": [{"arguments": {VALUE: [VALUE]}}]}
    [stored] = await events.append(
        mine.id, [NewEvent("assistant.message", data)], ProjectionChange()
    )
    assert VALUE not in stored.data_json
    assert stored.data == {"content": "x****y", "tool_calls": [{"arguments": {"****": ["****"]}}]}
    # Another user's conversation is not masked with alice's values.
    [plain] = await events.append(theirs.id, [NewEvent("user.message", data)], ProjectionChange())
    assert VALUE in plain.data_json
