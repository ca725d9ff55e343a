"""The server process's file descriptors, set once at start (`burrow serve`).

It takes its whole allowance: the soft RLIMIT_NOFILE (often 1,024) is raised to the hard
limit, so that streams and connections counted against caps derived from it
(burrow/api/streams.py, burrow/api/listener.py) run out before the process does.

And nothing it inherited reaches a child: every descriptor from 3 up is marked
close-on-exec. Python opens its own descriptors that way (PEP 446), but whoever started the
server may have left theirs open, and uvloop's `subprocess_exec` ignores `close_fds`, so
they would be readable and writable from every sandboxed shell and from slirp4netns.
Children get only what they are handed explicitly (`pass_fds`).
"""

from __future__ import annotations

import os
import resource

# Where no limit is set (RLIM_INFINITY) the caps still need a number.
UNLIMITED = 1 << 20
# Descriptors no cap hands out: the database, listeners, sandboxes' sockets and pipes, log
# files, requests in flight.
RESERVED = 256


def raise_open_file_limit() -> int:
    """Raise the soft limit to the hard one; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # An unlimited hard limit is refused as a soft one (fs.nr_open caps it): then 2**20.
    for wanted in (hard, UNLIMITED):
        if soft == hard or (soft != resource.RLIM_INFINITY and soft >= wanted):
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            break
        except (ValueError, OSError):
            continue
    return open_file_limit()


def open_file_limit() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return UNLIMITED if soft == resource.RLIM_INFINITY else soft


def close_inherited_on_exec() -> list[int]:
    """Mark every open descriptor from 3 up close-on-exec; the ones that were not."""
    marked = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd < 3:
            continue
        try:
            if os.get_inheritable(fd):
                os.set_inheritable(fd, False)
                marked.append(fd)
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return marked
