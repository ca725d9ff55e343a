"""`burrow eval`: a suite of tasks run through a real Burrow server, checked in the sandbox."""
