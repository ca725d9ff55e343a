"""Which URLs, refs and remote names git is given, and the credential's scope."""

from __future__ import annotations

import pytest

from burrow.runs.workspace.git.remote import (
    GitRefused,
    check_ref,
    check_remote_name,
    check_url,
    git_options,
    github_repository,
)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc",
        "/etc",
        "../other",
        "ext::sh -c touch% /tmp/x",
        "fd::3",
        "ssh://git@example.com/r.git",
        "git@example.com:r.git",
        "--upload-pack=touch /tmp/x",
        "-uhttps://example.com/r.git",
        "https://user:pw@example.com/r.git",
        "https://token@example.com/r.git",
        "https://example.com/r.git\n--upload-pack=x",
        "https:///r.git",
        "https://example.com:99999/r.git",
        "",
        "https://e.com/" + "a" * 3000,
    ],
)
def test_urls_that_would_read_files_run_commands_or_store_credentials_are_refused(
    url: str,
) -> None:
    with pytest.raises(GitRefused) as refused:
        check_url(url)
    assert refused.value.code == "invalid_repo_url" and refused.value.message


def test_network_urls_are_accepted_and_scoped_to_their_origin() -> None:
    remote = check_url("https://github.com/acme/widget.git")
    assert remote.origin == "https://github.com" and remote.path == "/acme/widget.git"
    assert check_url("http://192.0.2.7:8080/x.git").origin == "http://192.0.2.7:8080"
    assert check_url("git://example.com/r").scheme == "git"
    assert github_repository(remote) == ("acme", "widget")
    assert github_repository(check_url("https://ghe.example/api/org/repo/")) == ("org", "repo")
    with pytest.raises(GitRefused):
        github_repository(check_url("https://github.com/widget.git"))


@pytest.mark.parametrize(
    "ref", ["--upload-pack=x", "-b", "a..b", "a//b", "x.lock", "dir/", ".hidden", "a b", "a~1",
            "a^", "a:b", "a@{1}", "x" * 256, ""],
)  # fmt: skip
def test_refs_that_git_would_read_as_options_or_reject_are_refused(ref: str) -> None:
    with pytest.raises(GitRefused) as refused:
        check_ref(ref)
    assert refused.value.code == "invalid_ref"


def test_ordinary_refs_and_remote_names_pass() -> None:
    for ref in ("main", "release/1.2", "v1.0.0", "feature_x", "burrow/change-3"):
        assert check_ref(ref) == ref
    assert check_remote_name("origin") == "origin"
    for bad in ("-x", "a/b", "", "o" * 65):
        with pytest.raises(GitRefused):
            check_remote_name(bad)


def test_the_credential_helper_is_scoped_and_every_inherited_helper_forgotten() -> None:
    remote = check_url("https://github.com/acme/widget.git")
    options = git_options(remote, with_credential=True)
    pairs = [options[i + 1] for i in range(0, len(options), 2)]
    assert all(options[i] == "-c" for i in range(0, len(options), 2))
    assert "credential.helper=" in pairs
    helper = [p for p in pairs if p.startswith("credential.https://github.com.helper=")]
    assert len(helper) == 1 and "$BURROW_GIT_PASSWORD" in helper[0]
    assert pairs.index("credential.helper=") < pairs.index(helper[0])  # reset, then ours
    assert {"protocol.allow=never", "core.hooksPath=/dev/null"} <= set(pairs)
    assert not any("helper=!" in p for p in git_options(remote, with_credential=False))
