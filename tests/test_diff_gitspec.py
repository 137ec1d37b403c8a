"""gpupool diff --base: the base tree comes from `git ls-tree` + `git cat-file --batch` (not `git archive`):
every tracked file, export-ignore or not; symlinks recreated, never followed here; bad encodings located."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpupool.analysis.gitspec import materialize
from tests.test_diff import TENANTS, run, stack


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    stack(root / "stacks" / "dev")
    _git(root, "init", "-q")
    monkeypatch.chdir(root)
    return root


def _commit(repo: Path, msg: str = "c") -> None:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", msg)


def test_export_ignore_files_are_still_read(repo, capsys):
    (repo / ".gitattributes").write_text("stacks/dev/tenants/notebooks.yaml export-ignore\n")
    _commit(repo)
    code, out, err = run(capsys, "--base", "HEAD", "stacks/dev/spec.yaml", "--exit-code")
    assert code == 0, out + err  # unchanged tree: no changes at all (git archive would drop notebooks)
    assert "no changes" in out and "onboarded" not in out


def test_symlink_inside_the_stack_is_recreated(repo, capsys, tmp_path):
    tenants = repo / "stacks" / "dev" / "tenants"
    shared = repo / "stacks" / "dev" / "shared"
    shared.mkdir()
    (tenants / "notebooks.yaml").rename(shared / "notebooks.yaml")
    os.symlink("../shared/notebooks.yaml", tenants / "notebooks.yaml")
    _commit(repo)
    dest = tmp_path / "out"
    spec, _ = materialize("HEAD", "stacks/dev/spec.yaml", dest)
    link = dest / "stacks/dev/tenants/notebooks.yaml"
    assert link.is_symlink() and os.readlink(link) == "../shared/notebooks.yaml"
    assert (dest / "stacks/dev/shared/notebooks.yaml").read_bytes() == (shared / "notebooks.yaml").read_bytes()
    code, out, _ = run(capsys, "--base", "HEAD", "stacks/dev/spec.yaml", "--exit-code")
    assert code == 0 and "no changes" in out


def test_symlink_target_outside_the_stack_is_materialised_too(repo, tmp_path):
    common = repo / "common"
    common.mkdir()
    tenants = repo / "stacks" / "dev" / "tenants"
    (tenants / "notebooks.yaml").rename(common / "notebooks.yaml")
    os.symlink("../../../common/notebooks.yaml", tenants / "notebooks.yaml")
    _commit(repo)
    dest = tmp_path / "out"
    materialize("HEAD", "stacks/dev/spec.yaml", dest)
    # the same relative link, and its in-repository target exists beside it: the loader sees what HEAD sees
    assert os.readlink(dest / "stacks/dev/tenants/notebooks.yaml") == "../../../common/notebooks.yaml"
    assert (dest / "common/notebooks.yaml").is_file()


def test_symlink_leaving_the_repository_is_never_followed(repo, tmp_path, capsys):
    outside = tmp_path / "outside-secret.yaml"
    outside.write_text("name: secret-tenant-xyzzy\n")
    tenants = repo / "stacks" / "dev" / "tenants"
    os.symlink(os.path.relpath(outside, tenants), tenants / "leak.yaml")
    _commit(repo)
    outside.unlink()  # materialize must not need (or read) it
    dest = tmp_path / "out"
    materialize("HEAD", "stacks/dev/spec.yaml", dest)
    link = dest / "stacks/dev/tenants/leak.yaml"
    assert link.is_symlink()
    # it points where the working tree's link points (the loader rules on both alike), not into dest
    assert os.readlink(link) == str(outside)
    outside.write_text("name: secret-tenant-xyzzy\n")
    code, out, err = run(capsys, "--base", "HEAD", "stacks/dev/spec.yaml")
    # BASE and HEAD treat the link the same way: no tenant appears or disappears because of it
    assert "onboarded" not in out and "removed" not in out.replace("0 to remove", "")


def test_non_utf8_files_are_located_diagnostics(repo, capsys):
    (repo / "stacks/dev/tenants/notebooks.yaml").write_bytes(b"name: notebooks\ntier: caf\xe9\n")
    _commit(repo)
    stack(repo / "stacks" / "dev")  # HEAD fixes it
    code, out, err = run(capsys, "--base", "HEAD", "stacks/dev/spec.yaml")
    assert code == 0, err
    assert "HEAD:stacks/dev/tenants/notebooks.yaml:2:10: error:" in err and "UTF-8" in err
    assert "tenant notebooks is UNREADABLE in BASE" in out
    assert "notebooks onboarded" not in out


def test_non_utf8_spec_at_base(repo, capsys):
    spec = repo / "stacks/dev/spec.yaml"
    good = spec.read_bytes()
    spec.write_bytes(b"# caf\xe9\n" + good)
    _commit(repo)
    spec.write_bytes(good)
    code, out, err = run(capsys, "--base", "HEAD", "stacks/dev/spec.yaml")
    assert code == 0, err  # HEAD gates; BASE is reported, located at the byte, no crash (exit 70 before)
    assert "HEAD:stacks/dev/spec.yaml:1:6: error:" in err and "UTF-8" in err
    assert "Nothing was compared" in out


def test_unknown_ref_exits_2(repo, capsys):
    _commit(repo)
    code, _, err = run(capsys, "--base", "no-such-ref", "stacks/dev/spec.yaml")
    assert code == 2 and "unknown git ref 'no-such-ref'" in err
    code, _, err = run(capsys, "--base=--upload-pack=x", "stacks/dev/spec.yaml")
    assert code == 2


def test_many_tenants_one_cat_file(repo, capsys):
    tenants = {
        f"t{i:03d}": {"name": f"t{i:03d}", "tier": "standard", "owners": ["g"], "gpus": {"nvidia.com/gpu.shared": 0}}
        for i in range(200)
    }
    stack(repo / "stacks" / "dev", tenants={**TENANTS, **tenants})
    _commit(repo)
    code, out, err = run(capsys, "--base", "HEAD", "stacks/dev/spec.yaml", "--exit-code")
    assert code == 0 and "no changes" in out, err


def test_spec_that_was_a_symlink_at_the_base(repo, capsys):
    """At the base the spec was a link to a real file beside it: the paths that file names (a chart outside
    the stack directory) are still materialised."""
    import yaml

    chart = repo / "charts" / "gpu-operator"
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: gpu-operator\nversion: 26.7.0\n")
    spec = repo / "stacks/dev/spec.yaml"
    doc = yaml.safe_load(spec.read_text())
    doc["cluster"]["gpuOperator"] = {"chartPath": "../../charts/gpu-operator"}
    (repo / "stacks/dev/real-spec.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    spec.unlink()
    os.symlink("real-spec.yaml", spec)
    _commit(repo)
    spec.unlink()
    (repo / "stacks/dev/real-spec.yaml").rename(spec)  # HEAD: a regular file again, same content
    code, out, err = run(capsys, "--base", "HEAD", "stacks/dev/spec.yaml", "--exit-code")
    assert code == 0 and "no changes" in out, out + err
    assert "GP101" not in err and "is invalid" not in out  # the chart was found at the base too
