"""Debian's nginx with deploy/nginx's routes, as a foreground process on 127.0.0.1.

The routes (deploy/nginx/burrow/*.conf) are the deployment's own files; only the listeners
and the upstreams (where the replicas and sandbox hosts are) are written here, as
deploy/nginx/nginx.conf and upstreams.conf do for compose.
"""

from __future__ import annotations

import contextlib
import getpass
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import unavailable

NGINX_DIR = Path(__file__).resolve().parents[2] / "deploy" / "nginx"
NGINX = "/usr/sbin/nginx"
# Which upstream answered: the topology test asserts requests land on every replica.
UPSTREAM_HEADER = "X-Burrow-Upstream"


def nginx_binary() -> str:
    found = shutil.which("nginx") or (NGINX if Path(NGINX).exists() else None)
    if found is None:
        unavailable("nginx (install it with `make nginx`)")
    assert found is not None
    return found


@dataclass(frozen=True)
class Upstreams:
    """Where the parts are: `host:port` of each replica's app and preview listeners, and
    of each sandbox host (by name: the prefix of its sandboxes' ids)."""

    apps: list[str]
    previews: list[str]
    sandbox_hosts: dict[str, str]

    def render(self) -> str:
        def block(name: str, servers: list[str], extra: str = "") -> str:
            lines = "".join(f"    server {s};\n" for s in servers)
            return f"upstream {name} {{\n{extra}{lines}}}\n"

        text = block("burrow_app", self.apps) + block("burrow_previews", self.previews)
        sticky = "    hash $terminal_conversation consistent;\n"
        text += block("burrow_terminals", self.apps, sticky)
        placed = "    hash $sandbox_key_in_query$sandbox_key_in_body consistent;\n"
        text += block("sandbox_placed", list(self.sandbox_hosts.values()), placed)
        routes = ""
        for name, address in self.sandbox_hosts.items():
            text += block(f"sandbox_{name}", [address])
            routes += f"    {name} sandbox_{name};\n"
        default = "    default sandbox_placed;\n"
        return text + f"map $sandbox_host_name $sandbox_upstream {{\n{default}{routes}}}\n"


@dataclass(frozen=True)
class Proxy:
    port: int  # the app and the previews
    gateway_port: int  # the sandbox gateway

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def gateway(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"


def main_config(root: Path, proxy: Proxy, upstreams: Upstreams) -> str:
    """The listeners of deploy/nginx/nginx.conf on 127.0.0.1 ports, in the foreground."""
    # As root, nginx's workers would run as `nobody`, which cannot enter the test's
    # temporary directory.
    user = "user root;\n" if getpass.getuser() == "root" else ""
    tag = f"add_header {UPSTREAM_HEADER} $upstream_addr always;"
    return f"""{user}worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    include burrow/http.conf;
    include upstreams.conf;
    server {{
        listen 127.0.0.1:{proxy.port} default_server;
        {tag}
        include burrow/app.conf;
    }}
    server {{
        listen 127.0.0.1:{proxy.port};
        server_name ~^[0-9]+-[a-z0-9_]+\\.preview\\.;
        {tag}
        include burrow/preview.conf;
    }}
    server {{
        listen 127.0.0.1:{proxy.gateway_port};
        {tag}
        include burrow/sandboxes.conf;
    }}
}}
"""


def write_config(root: Path, proxy: Proxy, upstreams: Upstreams) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "burrow").symlink_to(NGINX_DIR / "burrow")
    (root / "upstreams.conf").write_text(upstreams.render())
    conf = root / "nginx.conf"
    conf.write_text(main_config(root, proxy, upstreams))
    return conf


def check_config(conf: Path) -> None:
    """`nginx -t`: the configuration parses and every include resolves."""
    checked = subprocess.run(
        [nginx_binary(), "-t", "-p", str(conf.parent), "-c", str(conf)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


@contextlib.contextmanager
def running_proxy(root: Path, proxy: Proxy, upstreams: Upstreams) -> Iterator[Proxy]:
    """nginx in the foreground (its own process, killed at the end) until it listens."""
    conf = write_config(root, proxy, upstreams)
    check_config(conf)
    argv = [nginx_binary(), "-p", str(root), "-c", str(conf), "-g", "daemon off;"]
    stderr = (root / "stderr.log").open("wb")
    process = subprocess.Popen(argv, stderr=stderr)
    try:
        deadline = time.monotonic() + 10
        while True:
            if process.poll() is not None:
                raise AssertionError(f"nginx exited: {(root / 'stderr.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", proxy.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("nginx did not listen in time") from None
                time.sleep(0.05)
        yield proxy
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        stderr.close()
