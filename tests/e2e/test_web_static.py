"""Serving the built UI: SPA fallback, caching, and the API keeping its own 404s."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from burrow.api import web


def app_with(dist: Path) -> TestClient:
    app = FastAPI()

    @app.get("/api/ping")
    async def ping() -> dict[str, str]:
        return {"pong": "yes"}

    web.mount(app, dist)
    return TestClient(app)


def build(tmp_path: Path) -> Path:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<!doctype html><div id=root></div>")
    (dist / "assets" / "index-abc123.js").write_text("console.log(1)")
    (dist / "favicon.svg").write_text("<svg/>")
    return dist


def test_index_and_client_routes_get_the_shell_uncached(tmp_path: Path) -> None:
    client = app_with(build(tmp_path))
    for path in ("/", "/c/abc", "/settings/deep/link"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert "id=root" in response.text
        assert response.headers["cache-control"] == "no-cache"


def test_hashed_assets_are_cached_for_long(tmp_path: Path) -> None:
    client = app_with(build(tmp_path))
    response = client.get("/assets/index-abc123.js")
    assert response.status_code == 200
    assert "immutable" in response.headers["cache-control"]
    assert client.get("/favicon.svg").headers["cache-control"] == "no-cache"
    assert client.get("/assets/missing.js").status_code == 404


def test_api_routes_win_and_unknown_api_paths_stay_json(tmp_path: Path) -> None:
    client = app_with(build(tmp_path))
    assert client.get("/api/ping").json() == {"pong": "yes"}
    missing = client.get("/api/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_paths_cannot_leave_dist(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("TOP-SECRET-BYTES")
    client = app_with(build(tmp_path))
    for path in ("/../secret.txt", "/%2e%2e/secret.txt", "/assets/..%2f..%2fsecret.txt"):
        assert "TOP-SECRET-BYTES" not in client.get(path).text


def test_a_nul_in_the_path_is_a_400_not_a_crash(tmp_path: Path) -> None:
    client = app_with(build(tmp_path))
    for path in ("/%00", "/assets/a%00.js", "/c/x%00y"):
        response = client.get(path)
        assert response.status_code == 400, (path, response.text)
        assert response.json()["error"]["code"] == "invalid_path"


def test_without_a_build_the_root_says_how_to_build(tmp_path: Path) -> None:
    client = app_with(tmp_path / "missing")
    response = client.get("/")
    assert response.status_code == 503
    assert "make run" in response.text
    assert client.get("/api/ping").status_code == 200
