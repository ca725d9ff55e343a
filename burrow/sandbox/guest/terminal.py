"""An interactive shell on a pseudo-terminal, served over one guest connection.

The shell leads a new session with the PTY as its controlling terminal, so the line
discipline does what a terminal user expects: Ctrl-C (byte 0x03) sends SIGINT to the
foreground job, a resize sends SIGWINCH. The connection is the session's lifetime: when
the host hangs up, every process of the session gets SIGHUP, and whatever of it is left
once the shell is gone (or after a grace period) SIGKILL: background jobs run in process
groups of their own, and a shell that exits on SIGHUP before passing it on to them, or a
job that ignores it, would outlive the terminal. (A process that left the session with
setsid is a daemon the user asked for; it lives until the sandbox stops.)
"""

from __future__ import annotations

import fcntl
import os
import selectors
import signal
import struct
import termios
import time

from . import protocol
from .protocol import GuestError
from .request import Request

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CHUNK_BYTES = 64 * 1024
HANGUP_GRACE_SECONDS = 1.0
DEFAULT_SHELL = ("/bin/bash", "--login")


def _signal_session(session: int, signum: int) -> None:
    """Every process whose session is `session` (the shell's pid), from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                stat = file.read()
            if int(stat[stat.rindex(b")") + 2 :].split()[3]) == session:
                os.kill(int(entry), signum)
        except (OSError, ValueError, IndexError):
            pass  # gone meanwhile


def _winsize(header: dict[str, Any]) -> bytes:
    cols, rows = header.get("cols"), header.get("rows")
    for value in (cols, rows):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 10000:
            raise GuestError("protocol", f"cols and rows must be integers 1-9999, not {value!r}")
    return struct.pack("HHHH", rows, cols, 0, 0)


class Terminal(Request):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.input = bytearray()

    def run(self) -> None:
        winsize = _winsize(self.header)
        argv = self.header.get("argv") or list(DEFAULT_SHELL)
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise GuestError("protocol", f"argv must be a list of strings, not {argv!r}")
        if not os.path.exists(argv[0]):
            argv = ["/bin/sh", "-i"]
        cwd = self.header.get("cwd") or self.workspace_root
        if not os.path.isdir(cwd):
            raise GuestError("invalid_cwd", f"Working directory {cwd} does not exist")
        env = dict(os.environ)
        env.update(self.header.get("env") or {})
        env.setdefault("TERM", "xterm-256color")
        try:
            pid, master = os.forkpty()
        except OSError as exc:
            raise GuestError(
                "internal", f"Could not start a shell: {exc} (is the sandbox at its process limit?)"
            ) from None
        if pid == 0:  # the child: only system calls until exec
            try:
                os.chdir(cwd)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        # The first size is set here, before any frame is read: set in the child, it could
        # land after a resize the host sent at once (the e2b SDK does) and undo it.
        fcntl.ioctl(master, termios.TIOCSWINSZ, winsize)
        try:
            self._serve(pid, master)
        finally:
            os.close(master)

    def _serve(self, pid: int, master: int) -> None:
        os.set_blocking(master, False)
        pidfd = os.pidfd_open(pid)
        selector = selectors.DefaultSelector()
        selector.register(master, selectors.EVENT_READ)
        selector.register(self.conn, selectors.EVENT_READ)
        selector.register(pidfd, selectors.EVENT_READ)
        self._send(protocol.encode_frame(protocol.PTY_STARTED, pid=pid))
        for frame in self.backlog:
            self._on_frame(frame, pid, master)
        self.backlog.clear()
        exited = hung_up = False
        hangup_deadline = None
        try:
            while not exited:
                want = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.input else 0)
                selector.modify(master, want)
                events = selector.select(None if hangup_deadline is None else 0.1)
                for key, mask in events:
                    if key.fd == pidfd:
                        exited = True
                    elif key.fileobj is self.conn:
                        if not self._read_host(pid, master):
                            selector.unregister(self.conn)
                            _signal_session(pid, signal.SIGHUP)
                            hung_up = True
                            hangup_deadline = time.monotonic() + HANGUP_GRACE_SECONDS
                    elif mask & selectors.EVENT_WRITE and self.input:
                        self._write_input(master)
                    if key.fd == master and mask & selectors.EVENT_READ:
                        self._forward(master)
                if hangup_deadline is not None and time.monotonic() > hangup_deadline:
                    _signal_session(pid, signal.SIGKILL)
                    hangup_deadline = None
            _, status = os.waitpid(pid, 0)
            if hung_up:  # the shell is gone: so is everything it started in its session
                _signal_session(pid, signal.SIGKILL)
            while self._forward(master):
                pass
            code = os.waitstatus_to_exitcode(status)
            self._send(
                protocol.encode_frame(
                    protocol.EXIT,
                    exit_code=code if code >= 0 else None,
                    signal=-code if code < 0 else None,
                    timed_out=False,
                    has_result=False,
                )
            )
        finally:
            selector.close()
            os.close(pidfd)

    def _forward(self, master: int) -> bool:
        try:
            data = os.read(master, CHUNK_BYTES)
        except (BlockingIOError, OSError):  # EIO: every slave end is closed
            return False
        if data:
            self._send(protocol.encode_frame(protocol.STDOUT, data))
        return bool(data)

    def _write_input(self, master: int) -> None:
        try:
            written = os.write(master, self.input[:CHUNK_BYTES])
            del self.input[:written]
        except BlockingIOError:
            pass
        except OSError:
            self.input.clear()

    def _read_host(self, pid: int, master: int) -> bool:
        frames = self._receive()
        if frames is None:
            return False
        for frame in frames:
            self._on_frame(frame, pid, master)
        return True

    def _on_frame(self, frame: protocol.Frame, pid: int, master: int) -> None:
        if frame.kind == protocol.STDIN:
            self.input += frame.payload
        elif frame.kind == protocol.RESIZE:
            try:
                fcntl.ioctl(master, termios.TIOCSWINSZ, _winsize(frame.header))
            except GuestError:
                pass  # a bad size from the host changes nothing
        elif frame.kind == protocol.SIGNAL:
            self._signal(pid, int(frame.header.get("signal", signal.SIGHUP)))

    @staticmethod
    def _signal(pid: int, signum: int) -> None:
        try:
            os.killpg(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
