"""What a run's hooks do around its model calls and tool calls: `base` holds the seam (the
Hook protocol, the run's stop) and the two smallest hooks; every other module is one hook."""
