"""deploy/helm/burrow without helm (not packaged for Debian bookworm): the chart's files
parse, every value a template reads is in values.yaml, the gateway's routes are
deploy/nginx's own files, and each template's skeleton (its actions taken out) is a
Kubernetes object of the kind the topology needs. What this cannot check is the
rendering itself; `helm lint deploy/helm/burrow` does, where helm is installed."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.deploy.proxy import NGINX_DIR

CHART = NGINX_DIR.parent / "helm" / "burrow"
ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)


def templates() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((CHART / "templates").glob("*.yaml"))}


def skeleton(text: str) -> list[dict[str, Any]]:
    """The template's YAML with lines that are only an action dropped and the other
    actions replaced by a word."""
    lines = [line for line in text.splitlines() if not ACTION.fullmatch(line.strip())]
    docs = yaml.safe_load_all(ACTION.sub("x", "\n".join(lines)))
    return [doc for doc in docs if doc]


def test_the_chart_and_its_values_parse() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "burrow"
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["replicas"]["count"] >= 2 and values["sandboxHost"]["count"] >= 1


def test_every_value_a_template_reads_is_defined() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    used = set()
    for text in templates().values():
        used |= set(re.findall(r"\.Values((?:\.[A-Za-z]+)+)", text))
    assert used
    for path in sorted(used):
        node = values
        for key in path.strip(".").split("."):
            assert isinstance(node, dict) and key in node, f".Values{path} is not in values.yaml"
            node = node[key]


def test_the_gateway_serves_deploy_nginx_routes() -> None:
    files = CHART / "files"
    assert files.is_symlink() and files.resolve() == (NGINX_DIR / "burrow").resolve()
    gateway = templates()["gateway.yaml"]
    for name in re.findall(r'\.Files\.Get "files/([^"]+)"', gateway):
        assert (files / name).is_file()
    assert "include burrow/sandboxes.conf;" in gateway and "include burrow/http.conf;" in gateway


def test_the_templates_make_the_topology() -> None:
    objects = [obj for text in templates().values() for obj in skeleton(text)]
    kinds = sorted((obj["kind"], obj["metadata"]["name"]) for obj in objects)
    assert kinds == [
        ("ConfigMap", "x-gateway"),
        ("Deployment", "x-app"),
        ("Deployment", "x-gateway"),
        ("Ingress", "x"),
        ("Ingress", "x-terminals"),
        ("Service", "x-app"),
        ("Service", "x-gateway"),
        ("Service", "x-sbx"),
        ("StatefulSet", "x-sbx"),
    ]
    by_name = {(obj["kind"], obj["metadata"]["name"]): obj for obj in objects}
    app = by_name["Deployment", "x-app"]
    env = {e["name"]: e for e in app["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BURROW_SANDBOX"]["value"] == "e2b"
    assert env["E2B_API_URL"]["value"] == env["E2B_SANDBOX_URL"]["value"] == "http://x-gateway:8430"
    assert env["BURROW_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["key"] == "database-url"
    probe = app["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    assert probe["httpGet"]["path"] == "/api/health"
    hosts = by_name["StatefulSet", "x-sbx"]["spec"]
    assert hosts["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    container = hosts["template"]["spec"]["containers"][0]
    assert container["args"][:2] == ["burrow", "sandbox-host"]
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
    assert container["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    terminals = by_name["Ingress", "x-terminals"]["metadata"]["annotations"]
    # Not $cookie_burrow_session: over https the cookie is __Host-burrow_session, which an
    # nginx variable cannot name, and the hash key would be empty.
    hash_by = terminals["nginx.ingress.kubernetes.io/upstream-hash-by"]
    assert hash_by == "$http_cookie$http_authorization"
