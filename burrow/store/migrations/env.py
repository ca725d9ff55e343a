"""Alembic's environment: `burrow.store.migrate` runs Alembic's commands with an open
connection in `config.attributes` (no alembic.ini, no URL here), inside the transaction of
`Database.run_schema_change`."""

from alembic import context

from burrow.store.schema import metadata

attributes = context.config.attributes
context.configure(
    connection=attributes["connection"],
    target_metadata=attributes.get("target_metadata", metadata),
    # SQLite alters little beyond ADD COLUMN: autogenerate writes batch operations, which
    # rebuild the table there (copy, drop, rename) and are plain ALTERs on PostgreSQL.
    render_as_batch=True,
    compare_type=True,
    process_revision_directives=attributes.get("process_revision_directives"),
)
with context.begin_transaction():
    context.run_migrations()
