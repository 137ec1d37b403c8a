"""Every file a command writes goes through gpupool.safe_write (issue 21 item 1), the output files the user
names included: `diff --full-output FILE`, `stacks --preview-out FILE` and the checkout of BASE that
`diff --base` writes. Such a name is often in a pull request's checkout (the workflow writes
gpupool-diff-full.md there), so the pull request can plant a link at it or on the way to it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gpupool import safe_write
from tests.test_diff import run, stack


@pytest.fixture
def specs(tmp_path, monkeypatch):
    """tmp_path/work (the current directory: BASE and HEAD specs) and tmp_path/victim/file = "keep"."""
    work = tmp_path / "work"
    stack(work / "base")
    stack(work / "head")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "file").write_text("keep")
    monkeypatch.chdir(work)
    return tmp_path


def _victim_intact(root: Path) -> None:
    assert sorted(os.listdir(root / "victim")) == ["file"]
    assert (root / "victim" / "file").read_text() == "keep"


@pytest.mark.parametrize("output", ["-o markdown", "-o json", "-o text"])
@pytest.mark.parametrize("planted", ["full.md", "out/full.md"])
def test_full_output_is_never_written_through_a_planted_link(specs, capsys, output, planted):
    os.symlink(specs / "victim" / "file", "full.md")
    os.symlink(specs / "victim", "out")
    code, out, err = run(capsys, "base/spec.yaml", "head/spec.yaml", *output.split(), "--full-output", planted)
    assert code == 1
    link = planted.split("/")[0]  # the link itself: the file, or the directory on the way to it
    assert f"error: --full-output {link}: is a symbolic link" in err and "nothing was written" in err
    assert out == "" if output != "-o json" else json.loads(out)["kind"] == "Error"  # no document, or the error object
    _victim_intact(specs)


def test_full_output_replaces_its_own_file_on_a_rerun(specs, capsys):
    """The workflow runs the diff twice into the same name (before and after the preview)."""
    for _ in range(2):
        code, out, _ = run(capsys, "base/spec.yaml", "head/spec.yaml", "-o", "markdown", "--full-output", "full.md")
        assert code == 0
    assert Path("full.md").read_text().startswith(out.split("\n", 1)[0])
    assert sorted(p for p in os.listdir(".") if p.startswith(".")) == []  # no temporary file left


def test_full_output_into_a_fifo_is_refused_without_blocking(specs, capsys):
    os.mkfifo("full.md")
    code, _, err = run(capsys, "base/spec.yaml", "head/spec.yaml", "--full-output", "full.md")
    assert code == 1 and "--full-output full.md: exists and is not a regular file" in err


def test_preview_out_is_never_written_through_a_planted_link(specs):
    from gpupool.deploy import stacks

    os.symlink(specs / "victim" / "file", "pulumi-preview.txt")
    platform = stacks.Platform.__new__(stacks.Platform)  # only the file writing: no workspace, no engine
    platform.s = stacks.Settings(project_dir=Path("."), backend_url="file://x", preview_out=Path("pulumi-preview.txt"))
    platform._previews = ["Previewing update (dev)\n"]
    with pytest.raises(stacks.StackError, match=r"--preview-out pulumi-preview.txt: is a symbolic link"):
        platform._write_previews()
    _victim_intact(specs)
    os.unlink("pulumi-preview.txt")
    platform._write_previews()
    platform._previews.append("Previewing update (dev.tenants-0)\n")
    platform._write_previews()  # rewritten whole: every preview so far, in order
    assert Path("pulumi-preview.txt").read_text() == "Previewing update (dev)\nPreviewing update (dev.tenants-0)\n"


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        input=stdin,
    ).stdout.strip()


def test_diff_base_checkout_stops_at_a_link_in_a_crafted_tree(tmp_path, monkeypatch, capsys):
    """A tree can name a link `tenants` and a file `tenants/x.yaml` at once: git refuses to check it out, but
    a crafted commit (git mktree) holds it. Materialising BASE must not write x.yaml where the link points."""
    repo = tmp_path / "repo"
    stack(repo)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "file").write_text("keep")
    _git(repo, "init", "-q")
    blob = lambda text: _git(repo, "hash-object", "-w", "--stdin", stdin=text)  # noqa: E731
    tenant = blob("name: x\ntier: standard\nowners: [a]\n")
    tenants = _git(repo, "mktree", stdin=f"100644 blob {tenant}\tx.yaml\n")
    spec = blob((repo / "spec.yaml").read_text())
    root = _git(
        repo,
        "mktree",
        stdin=f"100644 blob {spec}\tspec.yaml\n120000 blob {blob(str(victim))}\ttenants\n040000 tree {tenants}\ttenants\n",
    )
    _git(repo, "update-ref", "refs/heads/crafted", _git(repo, "commit-tree", root, "-m", "crafted"))
    monkeypatch.chdir(repo)
    code, _, err = run(capsys, "--base", "crafted", "spec.yaml")
    assert code in (0, 1) and "internal error" not in err
    assert sorted(os.listdir(victim)) == ["file"] and (victim / "file").read_text() == "keep"


def test_the_layer_is_the_only_writer():
    """No module of gpupool writes a file but through gpupool.safe_write (the generated docs included)."""
    import re

    root = Path(safe_write.__file__).parent
    writes = re.compile(r"\.write_text\(|\.write_bytes\(|open\([^)]*[\"'][wax]b?\+?[\"']|\.open\([\"'][wax]|os\.open\(")
    found = [
        f"{p.relative_to(root)}:{n}"
        for p in root.rglob("*.py")
        if p.name != "safe_write.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if writes.search(line) and "O_RDONLY" not in line
    ]
    assert found == [], found


def test_preview_file_is_never_read_through_a_planted_link(specs, capsys):
    """The workflow passes pulumi-preview.txt from the checkout to the comment: a link planted there must not
    publish what it points at (the runner's kubeconfig, say) in the pull request."""
    (specs / "victim" / "kubeconfig").write_text("client-key-data: SECRET")
    os.symlink(specs / "victim" / "kubeconfig", "pulumi-preview.txt")
    code, out, err = run(
        capsys, "base/spec.yaml", "head/spec.yaml", "-o", "markdown", "--preview-file", "pulumi-preview.txt"
    )
    assert code == 2 and "SECRET" not in out + err
    assert "--preview-file pulumi-preview.txt: is a symbolic link" in err
    os.unlink("pulumi-preview.txt")
    Path("pulumi-preview.txt").write_text("Previewing update (dev):\n  ~ 1 to update\n")
    code, out, _ = run(
        capsys, "base/spec.yaml", "head/spec.yaml", "-o", "markdown", "--preview-file", "pulumi-preview.txt"
    )
    assert code == 0 and "1 to update" in out
