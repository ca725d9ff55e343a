"""A2A (agent-to-agent, JSON-RPC 2.0 binding, protocol 0.3): the subset Burrow speaks."""
