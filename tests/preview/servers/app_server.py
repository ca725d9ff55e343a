"""A test service run inside the sandbox (stdlib only).

/headers echoes the request's headers as JSON, /peer names the connection's client port,
/echo returns the POSTed body, /big?mb=N streams N MiB, /cookie sets cookies (one named
like the proxy's own), /app-cookies sets cookies named like the app's session, anything
else says which path was asked."""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

CHUNK = b"x" * (1 << 20)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes; as Node does

    def log_message(self, *args):
        pass

    def _send(self, body, content_type="text/plain", extra=()):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/headers":
            headers = [[k.lower(), v] for k, v in self.headers.items()]
            self._send(json.dumps(headers).encode(), "application/json")
        elif url.path == "/big":
            mb = int(parse_qs(url.query)["mb"][0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(mb * len(CHUNK)))
            self.end_headers()
            for _ in range(mb):
                self.wfile.write(CHUNK)
        elif url.path == "/peer":  # which connection: kept-alive ones keep their port
            self._send(str(self.client_address[1]).encode())
        elif url.path == "/cookie":
            self._send(
                b"ok",
                extra=[
                    ("Set-Cookie", "app=1; Path=/"),
                    ("Set-Cookie", "burrow_preview=forged; Path=/"),
                ],
            )
        elif url.path == "/app-cookies":  # plants the app's session on the parent domain
            self._send(
                b"ok",
                extra=[
                    ("Set-Cookie", "burrow_session=planted; Domain=localhost; Path=/"),
                    ("Set-Cookie", "__Host-burrow_session=planted; Path=/; Secure"),
                    ("Set-Cookie", " Burrow_Session=planted; Path=/"),
                    ("Set-Cookie", "app=2; Path=/"),
                ],
            )
        else:
            self._send(f"path {self.path}".encode())

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        self._send(self.rfile.read(length))


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.request_queue_size = 128
ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
