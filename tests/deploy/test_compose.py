"""deploy/compose.yaml and deploy/nginx hold together: every part of the topology is there,
the replicas share one database and reach the sandbox hosts through the proxy's gateway,
the proxy routes what Burrow serves, and nginx accepts the configuration.

No container runtime runs here, so this checks the files; tests/deploy/test_topology.py
runs the same topology as processes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.proxy import NGINX_DIR, nginx_binary

DEPLOY = NGINX_DIR.parent
GATEWAY = "http://proxy:8430"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def replicas(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Services that run `burrow serve` (the image's default command) on a database."""
    return {
        name: service
        for name, service in compose["services"].items()
        if "BURROW_DATABASE_URL" in service.get("environment", {})
    }


def sandbox_hosts(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in compose["services"].items()
        if service.get("command", [])[:2] == ["burrow", "sandbox-host"]
    }


def variables(value: str) -> list[str]:
    """The `${NAME...}` compose interpolates into `value`."""
    return re.findall(r"\$\{(\w+)", value)


def upstream_servers(text: str, name: str) -> list[str]:
    block = re.search(r"upstream " + name + r" \{(.*?)\}", text, re.S)
    assert block, f"upstream {name} is missing"
    return re.findall(r"server (\S+);", block.group(1))


def location(conf: str, pattern: str) -> str:
    """The body of the location whose path matches `pattern` (its first line)."""
    for match in re.finditer(r"^location ([^{\n]+)\{(.*?)\n\}", conf, re.S | re.M):
        if re.fullmatch(pattern, match.group(1).strip()):
            return match.group(2)
    raise AssertionError(f"no location {pattern} in {conf[:200]}")


def test_the_topology_has_every_part(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert "postgres" in services and "proxy" in services
    assert len(replicas(compose)) >= 2
    assert len(sandbox_hosts(compose)) >= 2
    assert set(services) == {"postgres", "proxy", *replicas(compose), *sandbox_hosts(compose)}


def test_replicas_share_one_database_and_reach_the_sandbox_hosts_through_the_proxy(
    compose: dict[str, Any],
) -> None:
    envs = [service["environment"] for service in replicas(compose).values()]
    shared = ["BURROW_DATABASE_URL", "BURROW_SECRET_KEY", "BURROW_ADMIN_PASSWORD", "E2B_API_KEY"]
    for name in [*shared, "BURROW_PREVIEW_DOMAIN", "BURROW_TRUSTED_PROXIES"]:
        assert len({env[name] for env in envs}) == 1, f"{name} differs between replicas"
    url = envs[0]["BURROW_DATABASE_URL"]
    assert url.startswith("postgresql+asyncpg://burrow:") and url.endswith("@postgres:5432/burrow")
    # Each replica has its own name (its runs' leases) and its own data directory.
    assert len({env["BURROW_REPLICA_ID"] for env in envs}) == len(envs)
    volumes = [service["volumes"][0] for service in replicas(compose).values()]
    assert len(set(volumes)) == len(volumes) and all(v.endswith(":/data") for v in volumes)
    for env in envs:
        assert env["BURROW_SANDBOX"] == "e2b"
        assert env["E2B_API_URL"] == env["E2B_SANDBOX_URL"] == GATEWAY
        assert env["BURROW_HOST"] == "0.0.0.0"
        assert (env["BURROW_PORT"], env["BURROW_PREVIEW_PORT"]) == ("8420", "8421")
    postgres = compose["services"]["postgres"]["environment"]
    assert variables(url) == variables(postgres["POSTGRES_PASSWORD"]) == ["POSTGRES_PASSWORD"]
    # The sandbox hosts accept the key the replicas present.
    key = variables(envs[0]["E2B_API_KEY"])
    assert key == ["BURROW_SANDBOX_KEY"]
    for host in sandbox_hosts(compose).values():
        assert variables(host["environment"]["BURROW_SANDBOX_HOST_API_KEYS"]) == key


def test_only_the_proxy_is_trusted_and_only_its_front_is_published(
    compose: dict[str, Any],
) -> None:
    proxy = compose["services"]["proxy"]
    address = proxy["networks"]["burrow"]["ipv4_address"]
    subnet = compose["networks"]["burrow"]["ipam"]["config"][0]["subnet"]
    assert address.rsplit(".", 1)[0] == subnet.rsplit(".", 1)[0]
    for service in replicas(compose).values():
        assert service["environment"]["BURROW_TRUSTED_PROXIES"] == address
    assert proxy["ports"] == ["${BURROW_HTTP_PORT:-8080}:80"]  # not the gateway's 8430
    assert "./nginx:/etc/burrow-nginx:ro" in proxy["volumes"]
    published = [name for name, s in compose["services"].items() if s.get("ports")]
    assert published == ["proxy"]


def test_every_service_has_a_healthcheck_and_starts_after_what_it_needs(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    for name, service in services.items():
        assert service["healthcheck"]["test"][0] == "CMD", name
    for service in [*replicas(compose).values(), services["proxy"]]:
        assert "/api/health" in service["healthcheck"]["test"][-1]
    for service in replicas(compose).values():
        assert service["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    needed = {*replicas(compose), *sandbox_hosts(compose)}
    assert set(services["proxy"]["depends_on"]) == needed
    conditions = {d["condition"] for d in services["proxy"]["depends_on"].values()}
    assert conditions == {"service_healthy"}


def test_sandbox_hosts_have_their_own_data_and_what_bubblewrap_needs(
    compose: dict[str, Any],
) -> None:
    volumes = set()
    for name, host in sandbox_hosts(compose).items():
        assert host["command"] == [
            "burrow", "sandbox-host", "--host", "0.0.0.0", "--port", "8430", "--data-dir", "/data"
        ]  # fmt: skip
        assert host["environment"]["BURROW_SANDBOX_HOST_NAME"] == name  # its ids' prefix
        [volume] = host["volumes"]
        assert volume == f"{name}-data:/data" and volume.split(":")[0] in compose["volumes"]
        volumes.add(volume)
        assert host["cap_add"] == ["SYS_ADMIN"]
        assert set(host["security_opt"]) == {"seccomp=unconfined", "apparmor=unconfined"}
        assert host["cgroup"] == "private"
        assert host["devices"] == ["/dev/net/tun:/dev/net/tun"]
        assert host["entrypoint"] == ["sandbox-host-entrypoint"]
        assert "privileged" not in host
    assert len(volumes) == len(sandbox_hosts(compose))


def test_the_upstreams_name_every_replica_and_sandbox_host(compose: dict[str, Any]) -> None:
    text = (NGINX_DIR / "upstreams.conf").read_text()
    names = sorted(replicas(compose))
    assert sorted(upstream_servers(text, "burrow_app")) == [f"{n}:8420" for n in names]
    assert sorted(upstream_servers(text, "burrow_terminals")) == [f"{n}:8420" for n in names]
    assert "hash $terminal_conversation consistent;" in text
    assert sorted(upstream_servers(text, "burrow_previews")) == [f"{n}:8421" for n in names]
    hosts = sorted(sandbox_hosts(compose))
    assert sorted(upstream_servers(text, "sandbox_placed")) == [f"{h}:8430" for h in hosts]
    for host in hosts:
        assert upstream_servers(text, f"sandbox_{host}") == [f"{host}:8430"]
        assert re.search(rf"^\s+{host}\s+sandbox_{host};$", text, re.M)


def test_the_proxy_routes_the_api_sse_terminals_and_previews() -> None:
    app = (NGINX_DIR / "burrow" / "app.conf").read_text()
    sse = location(app, r"~ \^/api/conversations/\[\^/\]\+/events\$")
    assert "proxy_buffering off;" in sse and "proxy_read_timeout 1h;" in sse
    ws = location(app, r"~ \^/api/conversations/\[\^/\]\+/terminals/\[\^/\]\+/ws\$")
    assert "proxy_read_timeout 1h;" in ws
    terminals = location(app, r"~ \^/api/conversations/\[\^/\]\+/terminals\(/\[\^/\]\+\)\?\$")
    rest = location(app, "/")
    for body in (sse, rest):
        assert "proxy_pass http://burrow_app;" in body
    # A terminal lives in one replica: its requests and sockets all go there.
    for body in (ws, terminals):
        assert "proxy_pass http://burrow_terminals;" in body
    for body in (sse, ws, terminals, rest):
        assert "include burrow/forwarded.conf;" in body
    forwarded = (NGINX_DIR / "burrow" / "forwarded.conf").read_text()
    for header in ("Upgrade $http_upgrade", "Connection $connection_upgrade"):
        assert f"proxy_set_header {header};" in forwarded
    # The client's own X-Forwarded-For is replaced, never appended to.
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in forwarded
    assert "X-Forwarded-Proto $scheme;" in forwarded and "X-Forwarded-Host $http_host;" in forwarded
    preview = (NGINX_DIR / "burrow" / "preview.conf").read_text()
    assert "proxy_pass http://burrow_previews;" in preview
    main = (NGINX_DIR / "nginx.conf").read_text()
    assert re.search(r"server_name ~\^\[0-9\]\+-\[a-z0-9_\]\+\\\.preview\\\.;", main)
    gateway = (NGINX_DIR / "burrow" / "sandboxes.conf").read_text()
    assert "proxy_pass http://$sandbox_upstream;" in gateway
    assert "proxy_buffering off;" in gateway and "proxy_request_buffering off;" in gateway


def test_nginx_accepts_the_deployments_configuration(tmp_path: Path) -> None:
    """`nginx -t` on deploy/nginx as the proxy container mounts it, with compose's
    service names (which do not resolve here) replaced by an address."""
    conf = tmp_path / "nginx"
    shutil.copytree(NGINX_DIR, conf)
    upstreams = conf / "upstreams.conf"
    upstreams.write_text(
        re.sub(r"server [a-z0-9-]+:(\d+);", r"server 127.0.0.1:\1;", upstreams.read_text())
    )
    main = conf / "nginx.conf"
    main.write_text(main.read_text().replace("pid /run/nginx.pid;", f"pid {tmp_path}/nginx.pid;"))
    checked = subprocess.run(
        [nginx_binary(), "-t", "-p", str(conf), "-c", str(main)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
