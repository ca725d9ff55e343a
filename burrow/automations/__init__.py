"""Automations (DESIGN.md §9): work that starts from a schedule, an HTTP call or GitHub,
without a person at the keyboard, and runs within hard limits."""
