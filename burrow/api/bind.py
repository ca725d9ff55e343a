"""The listening sockets of `burrow serve`, bound before anything else starts.

Bound first, a port another program holds is one clear message and exit status 2 within
milliseconds, not half a second of imports and then uvicorn's traceback (13 KB of it, both
listeners' lifespans unwinding). And clients that connect while the server is still
starting wait in the socket's backlog instead of being refused. Standard library only: it
runs before the web stack is imported.
"""

from __future__ import annotations

import errno
import socket

# uvicorn's default listen backlog, kept: a page's burst of requests at start fits.
BACKLOG = 2048
# No such address here, or a name that does not resolve (create_server re-raises the
# resolver's gaierror as an OSError with its EAI_* code).
UNKNOWN_ADDRESS = {errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, socket.EAI_NONAME, socket.EAI_NODATA}


class PortUnavailable(Exception):
    """A listener's address cannot be bound; the message says which and what to do."""


def bind_listening_socket(host: str, port: int, what: str, option: str) -> socket.socket:
    """A socket listening on host:port for `what` ("the API and UI", "previews"), not
    inherited by child processes; `option` names the flag that chooses the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=BACKLOG)
    except OSError as exc:
        raise PortUnavailable(_explain(host, port, what, option, exc)) from exc


def _explain(host: str, port: int, what: str, option: str, exc: OSError) -> str:
    where = f"{host}:{port} ({what})"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: another program already does (another `burrow "
            f"serve`?). Stop it, or choose another port with {option}."
        )
    if exc.errno == errno.EACCES:
        return (
            f"cannot listen on {where}: permission denied; choose a port above 1023 with {option}."
        )
    if exc.errno in UNKNOWN_ADDRESS:
        return (
            f"cannot listen on {where}: this machine has no such address; choose another "
            "with --host (BURROW_HOST), e.g. 127.0.0.1 or 0.0.0.0."
        )
    return f"cannot listen on {where}: {exc.strerror or exc}."
