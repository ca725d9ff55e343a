"""A git server over smart HTTP for tests: `git http-backend` behind basic auth.

Run as `python -m tests.fakes.git_http_server ROOT ADDRESS PORT PASSWORD LOG` (the tests
start it inside a network namespace of their own). Every request must carry the password
(any user name); each request is logged as method, path and user, never the password.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar


class GitHandler(BaseHTTPRequestHandler):
    root: ClassVar[Path]
    password: ClassVar[str]
    log: ClassVar[Path]

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        user = self._user()
        path, _, query = self.path.partition("?")
        with self.log.open("a") as log:
            log.write(f"{self.command} {path} {query} user={user}\n")
        if user is None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self._body()
        env = {
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": user,  # http-backend allows receive-pack (push) only with one
            "REMOTE_ADDR": self.client_address[0],
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "PATH": "/usr/bin:/bin",
        }
        done = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _user(self) -> str | None:
        scheme, _, encoded = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return None
        user, _, password = base64.b64decode(encoded).decode().partition(":")
        return user if password == self.password else None

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def log_message(self, format: str, *args: object) -> None:
        pass  # the request log above is the one the tests read


def main() -> None:
    root, address, port, password, log = sys.argv[1:6]
    GitHandler.root, GitHandler.password, GitHandler.log = Path(root), password, Path(log)
    server = ThreadingHTTPServer((address, int(port)), GitHandler)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
