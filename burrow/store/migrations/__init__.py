"""Alembic's scripts for the store's schema: env.py, the revision template and versions/.

Run by `burrow.store.migrate`; write a new revision with `burrow db revision -m "..."`.
"""
