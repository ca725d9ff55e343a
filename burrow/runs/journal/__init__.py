"""The conversation's log: the closed event vocabulary, the numbered journal that commits
before it publishes, closing what a run left open, coalescing bursts, and other replicas'
commits fanned out to this one's followers. Depends on nothing else of `runs/`."""
