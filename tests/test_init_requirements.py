"""`gpupool init` writes the requirement that matches how gpupool was installed (issue 41 item 1).

The installed distribution's direct_url.json (PEP 610) says where pip got it: none (a package index) pins
`gpupool[pulumi]==VERSION`; a wheel file becomes a vendored wheel under ./vendor/ (its name only: never a
path outside the repository); a VCS URL is pinned to the commit it was installed from; an archive URL keeps
its sha256. No credential of a URL (user:password, a query) is ever written, nor anything that would make a
second line. The expected lines are written out by hand from PEP 610's examples and pip's requirement syntax.
tests/test_wheel.py runs it from a real wheel install."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement

from gpupool.scaffold import files, requirements

COMMIT = "7921be1537eac1e97bc40179a57f0349c2aee67d"  # PEP 610's own example commit


def _line(text: str) -> str:
    (line,) = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    return line


def test_an_index_install_pins_the_version():
    text = requirements("1.2.3", None)
    assert _line(text) == "gpupool[pulumi]==1.2.3"
    assert "package index" in text and "docs/howto/install.md" in text  # how it was chosen, how to change it


def test_a_wheel_file_becomes_a_vendored_wheel_inside_the_repository():
    url = {"url": "file:///home/me/Downloads/gpupool-1.2.3-py3-none-any.whl", "archive_info": {}}
    text = requirements("1.2.3", url)
    assert _line(text) == "./vendor/gpupool-1.2.3-py3-none-any.whl[pulumi]"
    assert "/home/me" not in text and "Downloads" not in text
    assert "copy gpupool-1.2.3-py3-none-any.whl into vendor/" in text


def test_an_oddly_named_file_gets_the_canonical_wheel_name():
    text = requirements("1.2.3", {"url": "file:///tmp/x/../../etc/passwd", "archive_info": {}})
    assert _line(text) == "./vendor/gpupool-1.2.3-py3-none-any.whl[pulumi]"
    assert "etc" not in text and ".." not in text


@pytest.mark.parametrize("info", [{"dir_info": {"editable": True}}, {"dir_info": {}}, {"vcs_info": {"vcs": "git"}}])
def test_a_local_directory_is_no_address_for_another_machine(info):
    text = requirements("1.2.3", {"url": "file:///work/checkout", **info})
    assert _line(text) == "gpupool[pulumi]==1.2.3"
    assert "/work/checkout" not in text and "local directory" in text


def test_a_git_url_is_pinned_to_its_commit_and_its_credentials_dropped():
    url = {
        "url": "https://deploy-bot:ghp_SECRET123@github.example.com/platform/gpupool.git",
        "vcs_info": {"vcs": "git", "commit_id": COMMIT, "requested_revision": "v1.2.3"},
    }
    text = requirements("1.2.3", url)
    line = _line(text)
    assert line == f"gpupool[pulumi] @ git+https://github.example.com/platform/gpupool.git@{COMMIT}"
    assert "SECRET" not in text and "deploy-bot" not in text
    assert "v1.2.3" in text  # the tag it was asked for, in the comment
    req = Requirement(line)
    assert req.name == "gpupool" and req.extras == {"pulumi"}


def test_a_token_as_the_user_name_is_dropped_too():
    """GitHub takes a token as the user name of an https URL (https://TOKEN@github.com/...)."""
    url = {"url": "https://ghp_TOKEN@github.com/o/gpupool.git", "vcs_info": {"vcs": "git", "commit_id": COMMIT}}
    text = requirements("1.2.3", url)
    assert "ghp_TOKEN" not in text and _line(text).endswith(f"git+https://github.com/o/gpupool.git@{COMMIT}")


@pytest.mark.parametrize("userinfo", ["git", "${GIT_USER}:${GIT_TOKEN}", "${CI_JOB_TOKEN}"])
def test_what_pep_610_lets_through_is_kept(userinfo):
    """PEP 610: environment variables (pip expands them) and a well-known non-secret such as `git`."""
    url = {"url": f"ssh://{userinfo}@git.example.com/o/gpupool.git", "vcs_info": {"vcs": "git", "commit_id": COMMIT}}
    assert _line(requirements("1.2.3", url)) == (
        f"gpupool[pulumi] @ git+ssh://{userinfo}@git.example.com/o/gpupool.git@{COMMIT}"
    )


def test_an_archive_url_keeps_its_hash_and_loses_its_query():
    sha = "a" * 64
    url = {
        "url": "https://files.example.com/gpupool-1.2.3-py3-none-any.whl?X-Amz-Signature=SIGNED",
        "archive_info": {"hashes": {"sha256": sha}},
    }
    text = requirements("1.2.3", url)
    assert _line(text) == f"gpupool[pulumi] @ https://files.example.com/gpupool-1.2.3-py3-none-any.whl#sha256={sha}"
    assert "SIGNED" not in text


@pytest.mark.parametrize(
    "url",
    [
        {"url": "https://h/g.git\n--index-url https://evil/", "vcs_info": {"vcs": "git", "commit_id": COMMIT}},
        {"url": "https://h/g.git", "vcs_info": {"vcs": "git", "commit_id": "main; rm -rf /"}},
        {"url": "https://h/g.git", "vcs_info": {"vcs": "cvs", "commit_id": COMMIT}},
        {"url": 7},
        {"url": "https://h:notaport/g.git", "vcs_info": {"vcs": "git", "commit_id": COMMIT}},
    ],
)
def test_what_cannot_be_written_safely_falls_back_to_the_index_pin(url):
    text = requirements("1.2.3", url)
    assert _line(text) == "gpupool[pulumi]==1.2.3"
    assert "evil" not in text and "rm -rf" not in text


def test_init_writes_it_into_the_scaffold():
    out = files("team", "1.2.3", "dev", {"url": "file:///x/gpupool-1.2.3-py3-none-any.whl", "archive_info": {}})
    assert _line(out["requirements.txt"]) == "./vendor/gpupool-1.2.3-py3-none-any.whl[pulumi]"
