"""`gpupool init DIR`: a platform team's own repository, scaffolded through the safe file-writing layer.

What it writes validates, its program is gpupool.pulumi.GpuPlatform (run here under Pulumi's mocks), its
workflow passes actionlint, and it writes nothing into a directory that is not new or empty, nor through a
link. tests/e2e/test_team_repository.py runs the scaffold end to end with the built wheel."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import pytest

from gpupool.cli.main import main
from tests.pulumi_mocks import run_program
from tests.test_workflow import _lint, actionlint  # noqa: F401 (the fixture)


def _init(*args: str) -> int:
    try:
        return main(["init", *args])
    except SystemExit as exc:
        return int(exc.code)


def test_init_writes_a_valid_repository(tmp_path, capsys):
    repo = tmp_path / "gpu-team"
    assert _init(str(repo)) == 0
    names = {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()}
    assert {
        "Pulumi.yaml",
        "__main__.py",
        "requirements.txt",
        "stacks/Pulumi.dev.yaml",
        "stacks/dev/spec.yaml",
        "stacks/dev/tenants/team-a.yaml",
        ".github/workflows/gpupool.yml",
        "README.md",
        "schemas/gpupool.schema.json",
    } <= names
    assert main(["validate", str(repo / "stacks" / "dev" / "spec.yaml")]) == 0
    assert "gpupool[pulumi]==" in (repo / "requirements.txt").read_text()
    assert "name: gpu-team" in (repo / "Pulumi.yaml").read_text()
    assert "gpupool stacks preview dev" in capsys.readouterr().out


def test_the_scaffolded_program_is_a_gpu_platform(tmp_path, monkeypatch):
    repo = tmp_path / "team"
    assert _init(str(repo), "--stack", "prod") == 0
    monkeypatch.chdir(repo)
    mocks, monitor, error = run_program(
        {"spec": "stacks/prod/spec.yaml"}, stack="prod", program=lambda: runpy.run_path(str(repo / "__main__.py"))
    )
    assert error is None, error
    types = {a.typ for a in mocks.created}
    assert {"gpupool:index:GpuPlatform", "gpupool:tenancy:Tenant", "pulumi:providers:kubernetes"} <= types
    assert all(r["urn"].rsplit("::", 1)[1].startswith("gpu") for r in monitor.requests.values())


def test_the_scaffolded_workflow_passes_actionlint(actionlint, tmp_path):  # noqa: F811
    repo = tmp_path / "team"
    assert _init(str(repo)) == 0
    p = _lint(actionlint, repo / ".github" / "workflows" / "gpupool.yml")
    assert p.returncode == 0, p.stdout + p.stderr


def test_init_refuses_a_directory_that_is_not_new_and_changes_nothing(tmp_path):
    repo = tmp_path / "mine"
    repo.mkdir()
    (repo / "notes.txt").write_text("keep")
    assert _init(str(repo)) == 2
    assert [p.name for p in repo.iterdir()] == ["notes.txt"]
    assert _init("--stack", "Bad_Name", str(tmp_path / "x")) == 2
    assert not (tmp_path / "x").exists()


def test_init_follows_no_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    link = tmp_path / "repo"
    os.symlink(outside, link)
    assert _init(str(link)) == 2  # a link is not a new directory
    assert list(outside.iterdir()) == []
    # a link further up the path to DIR is refused by the layer (no component is followed)
    assert _init(str(link / "sub")) == 1
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("name,want", [("My Platform!", "My-Platform"), ("...", "gpu-platform")])
def test_project_names(name, want):
    from gpupool.scaffold import project_name

    assert project_name(name) == want


def test_the_repository_readme_steps_name_real_commands(tmp_path):
    repo = tmp_path / "t"
    assert _init(str(repo)) == 0
    readme = (repo / "README.md").read_text()
    for command in ("gpupool validate", "gpupool plan", "gpupool stacks preview", "gpupool tenant new"):
        assert command in readme
    assert Path(repo / "stacks" / "dev" / "spec.yaml").read_text().startswith("# yaml-language-server: $schema=")


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("git", ["directory", "gitfile"])
def test_init_accepts_a_freshly_cloned_empty_repository_and_leaves_git_alone(tmp_path, git):
    """`git clone` of a new, empty repository leaves a directory holding only .git (a gitfile with
    --separate-git-dir or in a worktree): that is where a team runs init. Nothing is written into .git."""
    repo = tmp_path / "gpu-team"
    repo.mkdir()
    if git == "directory":
        (repo / ".git" / "refs" / "heads").mkdir(parents=True)
        (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (repo / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
        before = _tree(repo / ".git")
    else:
        (repo / ".git").write_text("gitdir: ../gpu-team.git\n")
    assert _init(str(repo)) == 0
    assert (repo / "stacks" / "dev" / "spec.yaml").is_file() and (repo / "Pulumi.yaml").is_file()
    if git == "directory":
        assert _tree(repo / ".git") == before
    else:
        assert (repo / ".git").read_text() == "gitdir: ../gpu-team.git\n"


def test_init_still_refuses_git_beside_anything_else_or_as_a_link(tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / ".git").mkdir()
    (other / "README.md").write_text("keep")
    assert _init(str(other)) == 2
    assert sorted(p.name for p in other.iterdir()) == [".git", "README.md"]
    assert "not an empty directory" in capsys.readouterr().err
    linked = tmp_path / "linked"
    linked.mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", linked / ".git")  # a link named .git is no clone's
    assert _init(str(linked)) == 2
    assert [p.name for p in linked.iterdir()] == [".git"] and list((tmp_path / "elsewhere").iterdir()) == []


def test_the_scaffold_writes_nothing_under_git():
    from gpupool.scaffold import files

    assert not [p for p in files("p", "0.1.0") if p == ".git" or p.startswith(".git/")]
