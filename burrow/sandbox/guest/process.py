"""One command run by the in-sandbox guest: spawn, stream, signal, time out, reap.

The command is the leader of a new session (so of a new process group): a timeout, a
`signal` frame or a host that hangs up reaches everything the command started. The exec
ends when the command itself exits, not when its pipes reach EOF, because a process it put
in the background (`server &`) inherits them; those pipes are then drained and discarded
until the last writer closes them, so the background process never dies of SIGPIPE.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

from . import protocol
from .protocol import GuestError
from .request import Request

CHUNK_BYTES = 64 * 1024
AFTER_EXIT_READ_LIMIT = 4 << 20  # output still buffered when the command exits
RESULT_FILE_LIMIT = 64 * 1024


class Execution(Request):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.stdin_buffer = bytearray()
        self.stdin_eof = False

    def run(self, before_exit: Callable[[], None] = lambda: None) -> None:
        proc = self._spawn()
        pidfd = os.pidfd_open(proc.pid)
        assert proc.stdout is not None and proc.stderr is not None
        streams = {proc.stdout.fileno(): protocol.STDOUT, proc.stderr.fileno(): protocol.STDERR}
        for fd in streams:
            os.set_blocking(fd, False)
        selector = selectors.DefaultSelector()
        selector.register(pidfd, selectors.EVENT_READ)
        selector.register(self.conn, selectors.EVENT_READ)
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        stdin_fd = proc.stdin.fileno() if proc.stdin is not None else None
        if stdin_fd is not None:
            os.set_blocking(stdin_fd, False)
        for frame in self.backlog:
            self._on_host_frame(frame, proc)
        timeout = self.header.get("timeout")
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        timed_out = False
        exited = False
        try:
            while not exited:
                stdin_fd = self._sync_stdin(selector, proc, stdin_fd)
                wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                events = selector.select(wait)
                if deadline is not None and time.monotonic() >= deadline:
                    timed_out, deadline = True, None
                    self._kill_group(proc, signal.SIGKILL)
                for key, _ in events:
                    if key.fd == pidfd:
                        exited = True
                    elif key.fd == stdin_fd:
                        stdin_fd = self._write_stdin(selector, proc, stdin_fd)
                    elif key.fileobj is self.conn:
                        self._read_host(selector, proc)
                    else:
                        self._forward(selector, key.fd, streams[key.fd])
            returncode = proc.wait()
            self._forward_remaining(streams, selector)
            result = self._take_result_file()
            before_exit()
            self._send(
                protocol.encode_frame(
                    protocol.EXIT,
                    result or b"",
                    exit_code=returncode if returncode >= 0 else None,
                    signal=-returncode if returncode < 0 else None,
                    timed_out=timed_out,
                    has_result=result is not None,
                ),
            )
        finally:
            for fileobj in (pidfd, stdin_fd, self.conn):
                if fileobj is not None and fileobj in selector.get_map():
                    selector.unregister(fileobj)
            if stdin_fd is not None:
                proc.stdin.close()  # type: ignore[union-attr]
            os.close(pidfd)
            self.conn.close()
        self._discard_until_eof(selector)
        selector.close()
        proc.stdout.close()
        proc.stderr.close()

    def _spawn(self) -> subprocess.Popen[bytes]:
        argv = self.header.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise GuestError("protocol", f"spawn needs a non-empty argv list, got {argv!r}")
        cwd = self.header.get("cwd") or self.workspace_root
        if not os.path.isdir(cwd):
            raise GuestError("invalid_cwd", f"Working directory {cwd} does not exist")
        env = dict(os.environ)
        env.update(self.header.get("env") or {})
        if self.header.get("read_only"):
            from .landlock import restrict_this_thread

            restrict_this_thread()  # this request's own thread, which ends with it
        try:
            return subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE if self.header.get("stdin") else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
            )
        except FileNotFoundError:
            raise GuestError("exec_not_found", f"Command not found: {argv[0]}") from None
        except PermissionError:
            raise GuestError("permission_denied", f"Not executable: {argv[0]}") from None
        except OSError as exc:
            raise GuestError("internal", f"Could not start {argv[0]}: {exc}") from None

    def _forward(self, selector: selectors.BaseSelector, fd: int, kind: str) -> None:
        try:
            data = os.read(fd, CHUNK_BYTES)
        except BlockingIOError:
            return
        if data:
            self._send(protocol.encode_frame(kind, data))
        else:
            selector.unregister(fd)

    def _forward_remaining(self, streams: dict[int, str], selector: selectors.BaseSelector) -> None:
        """Send what the command wrote before exiting; never wait for EOF."""
        budget = AFTER_EXIT_READ_LIMIT
        for fd, kind in streams.items():
            while budget > 0:
                try:
                    data = os.read(fd, min(CHUNK_BYTES, budget))
                except BlockingIOError:
                    break
                if not data:
                    if fd in selector.get_map():
                        selector.unregister(fd)
                    break
                budget -= len(data)
                self._send(protocol.encode_frame(kind, data))

    def _read_host(self, selector: selectors.BaseSelector, proc: subprocess.Popen[bytes]) -> None:
        frames = self._receive()
        if frames is None:
            # The host hung up (its exec iterator was closed or cancelled): stop the command.
            selector.unregister(self.conn)
            self._kill_group(proc, signal.SIGKILL)
            return
        for frame in frames:
            self._on_host_frame(frame, proc)

    def _on_host_frame(self, frame: protocol.Frame, proc: subprocess.Popen[bytes]) -> None:
        if frame.kind == protocol.SIGNAL:
            self._kill_group(proc, int(frame.header.get("signal", signal.SIGTERM)))
        elif frame.kind == protocol.STDIN:
            self.stdin_buffer += frame.payload
            self.stdin_eof = self.stdin_eof or bool(frame.header.get("eof"))

    def _sync_stdin(
        self, selector: selectors.BaseSelector, proc: subprocess.Popen[bytes], stdin_fd: int | None
    ) -> int | None:
        if stdin_fd is None:
            return None
        if not self.stdin_buffer and self.stdin_eof:
            if stdin_fd in selector.get_map():
                selector.unregister(stdin_fd)
            proc.stdin.close()  # type: ignore[union-attr]
            return None
        want_write = bool(self.stdin_buffer)
        registered = stdin_fd in selector.get_map()
        if want_write and not registered:
            selector.register(stdin_fd, selectors.EVENT_WRITE)
        elif not want_write and registered:
            selector.unregister(stdin_fd)
        return stdin_fd

    def _write_stdin(
        self, selector: selectors.BaseSelector, proc: subprocess.Popen[bytes], stdin_fd: int
    ) -> int | None:
        try:
            written = os.write(stdin_fd, self.stdin_buffer[:CHUNK_BYTES])
            del self.stdin_buffer[:written]
            return stdin_fd
        except BlockingIOError:
            return stdin_fd
        except OSError:  # the command closed its stdin; drop what it will never read
            selector.unregister(stdin_fd)
            proc.stdin.close()  # type: ignore[union-attr]
            self.stdin_buffer.clear()
            return None

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes], signum: int) -> None:
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _take_result_file(self) -> bytes | None:
        path = self.header.get("result_file")
        if not path:
            return None
        try:
            with open(path, "rb") as file:
                data = file.read(RESULT_FILE_LIMIT)
            os.unlink(path)
        except OSError:
            return None
        return data

    @staticmethod
    def _discard_until_eof(selector: selectors.BaseSelector) -> None:
        """Keep reading the pipes background processes inherited, so they never block."""
        while selector.get_map():
            for key, _ in selector.select():
                try:
                    data = os.read(key.fd, CHUNK_BYTES)
                except BlockingIOError:
                    continue
                if not data:
                    selector.unregister(key.fd)
