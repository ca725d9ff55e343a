"""The in-sandbox guest's accept loop: one connection per request, one thread each.

One connection per request (instead of multiplexing ids on one stream) makes the
connection the request's lifetime: a host that drops it cancels exactly that request,
a large file transfer never blocks a streaming exec, and no request table can leak.
A Unix-socket connect costs a few microseconds, so this is also the fast path.
"""

from __future__ import annotations

# The guest's start-up is on the sandbox's boot path: _thread, not threading; _socket, not
# socket (whose enums cost the start milliseconds); posix, not os (os, stat and the file
# API load with the first file request).
import _socket
import _thread
import posix

from . import protocol
from .protocol import GuestError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .files import Workspace

RECV_BYTES = 64 * 1024
# The variables of the environment the sandbox stands on, as its build left them in the
# root's layer (environments.py ENVIRONMENT_FILE): NUL-separated KEY=VALUE.
ENVIRONMENT_FILE = "/etc/burrow/environment"
# Commands running now (not terminals): the host keeps a busy sandbox from hibernating.
# A list mutated by one append/pop is atomic under the GIL, without importing threading.
_running: list[None] = []
_workspace: list[Workspace] = []  # the file API, once a request needs it
_files_anywhere = False  # --files-anywhere 1: the sandbox's whole tree (E2B's layout)


def serve(listener: _socket.socket, root: str) -> None:
    while True:
        fd, _ = listener._accept()  # type: ignore[attr-defined]  # socket.accept, unwrapped
        conn = _socket.socket(fileno=fd)
        _thread.start_new_thread(handle_connection, (conn, root))


def handle_connection(conn: _socket.socket, root: str) -> None:
    decoder = protocol.FrameDecoder()
    backlog: list[protocol.Frame] = []
    try:
        try:
            protocol.check_hello(_next_frame(conn, decoder, backlog))
        except protocol.ProtocolError as exc:
            conn.sendall(protocol.error_frame("protocol", str(exc), fatal=True))
            return
        conn.sendall(protocol.hello_frame())
        request = _next_frame(conn, decoder, backlog)
        try:
            _dispatch(conn, request, decoder, backlog, root)
        except GuestError as exc:
            conn.sendall(protocol.error_frame(exc.code, exc.message))
    except (ConnectionError, EOFError):
        pass  # the host went away; nothing is left to answer
    except protocol.ProtocolError as exc:
        _send_quietly(conn, protocol.error_frame("protocol", str(exc), fatal=True))
    except Exception as exc:  # keep the guest alive and tell the host what broke
        _send_quietly(conn, protocol.error_frame("internal", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _dispatch(
    conn: _socket.socket,
    request: protocol.Frame,
    decoder: protocol.FrameDecoder,
    backlog: list[protocol.Frame],
    root: str,
) -> None:
    kind = request.kind
    if kind == protocol.SPAWN:
        # Imported here so that the handshake, which gates sandbox readiness, does not
        # wait for subprocess and selectors to load.
        from .process import Execution

        # A background helper (an MCP server) lives as long as its host connection; it must
        # not keep the sandbox awake, so it is not a running command.
        counted = not request.header.get("background")
        if counted:
            _running.append(None)
        finished: list[None] = []

        def leave() -> None:
            # Once, before the exit frame goes out: a host that hibernates as soon as it
            # reads the exit must not find the command still counted.
            if counted and not finished:
                finished.append(None)
                _running.pop()

        try:
            Execution(conn, decoder, backlog, request.header, root).run(before_exit=leave)
        finally:
            leave()
    elif kind == protocol.PTY_OPEN:
        from .terminal import Terminal

        Terminal(conn, decoder, backlog, request.header, root).run()
    elif kind == protocol.PING:
        conn.sendall(protocol.encode_frame(protocol.PONG, busy=len(_running)))
    elif kind == protocol.READ:
        conn.sendall(_files(root).read(request.header))
    elif kind == protocol.WRITE:
        conn.sendall(_files(root).write(request.header, request.payload))
    elif kind == protocol.LIST:
        conn.sendall(_files(root).list(request.header))
    elif kind == protocol.STAT:
        conn.sendall(_files(root).stat(request.header))
    elif kind == protocol.TUNNEL:
        from .tunnel import open_tunnel

        open_tunnel(conn, request.header, decoder.take_pending())
    else:
        raise GuestError("protocol", f"{kind!r} is not a request")


def _files(root: str) -> Workspace:
    if not _workspace:  # two threads may both build one: the same, either will do
        from .files import Workspace

        _workspace.append(Workspace(root, _files_anywhere))
    return _workspace[0]


def _make_undumpable() -> None:
    """Close /proc/<guest>/mem, environ and fd to the sandbox's code, which runs as the
    same uid: without CAP_SYS_PTRACE nothing may touch an undumpable process (seccomp
    refuses ptrace itself). Children are dumpable again once they exec. The first thing
    the guest does; prctl through _ctypes alone (the ctypes package costs the boot ~3 ms)."""
    import _ctypes

    class Libc:
        _handle = _ctypes.dlopen(None, 2)  # type: ignore[arg-type]  # RTLD_NOW, the program

    class Int(_ctypes._SimpleCData):  # type: ignore[type-arg]  # not generic at run time
        _type_ = "i"

    class Function(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Int

    pr_set_dumpable = 4
    if Function(("prctl", Libc))(pr_set_dumpable, 0, 0, 0, 0) != 0:  # type: ignore[arg-type]
        raise OSError(_ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _environment_variables() -> None:
    """The environment's variables (its definition's `env`, a Dockerfile's ENV) into the
    environ every command and terminal starts from. Read before `os` loads, whose
    os.environ is made from this same posix.environ dict; a missing file is the host's
    system, or an environment without variables. They are the sandbox's own to change."""
    try:
        fd = posix.open(ENVIRONMENT_FILE, posix.O_RDONLY | posix.O_CLOEXEC | posix.O_NOFOLLOW)
    except OSError:
        return
    try:
        data = posix.read(fd, 1 << 20)
    finally:
        posix.close(fd)
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            posix.environ[key] = value


def _next_frame(
    conn: _socket.socket, decoder: protocol.FrameDecoder, backlog: list[protocol.Frame]
) -> protocol.Frame:
    while not backlog:
        data = conn.recv(RECV_BYTES)
        if not data:
            raise EOFError
        backlog.extend(decoder.feed(data))
    return backlog.pop(0)


def _send_quietly(conn: _socket.socket, data: bytes) -> None:
    try:
        conn.sendall(data)
    except OSError:
        pass


def main(argv: list[str]) -> None:
    """`main(["--listen-fd", N, "--workspace", DIR])`: serve on the socket the host bound
    (bwrap.build_argv starts it)."""
    _make_undumpable()
    _environment_variables()
    options = dict(zip(argv[0::2], argv[1::2], strict=False))
    listen_fd = int(options["--listen-fd"])
    posix.set_inheritable(listen_fd, False)  # commands must never get the guest's socket
    listener = _socket.socket(fileno=listen_fd)
    root = options["--workspace"]  # a mount point of bwrap's: no symlink to resolve
    global _files_anywhere
    _files_anywhere = options.get("--files-anywhere") == "1"  # E2B's layout (files.py)
    # The guest's own working directory stays its read-only /.burrow: commands and
    # terminals get the workspace (or their cwd) as theirs, never the guest.
    serve(listener, root)
