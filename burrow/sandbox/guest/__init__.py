"""The guest that runs inside a sandbox (stdlib only: it runs with the sandbox's python3)."""
