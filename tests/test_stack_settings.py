"""`--stack NAME` reads the key the Pulumi program reads, `gpupool:spec`, in a repository whose Pulumi project is
not named gpupool (every repository `gpupool init` makes), and the program finds the spec there too (issue 41
item 2). A key without a namespace in a stack file is the project's (Pulumi's rule), so it is gpupool's only
in a project named gpupool."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import yaml

from gpupool.cli.main import main
from gpupool.spec.stack import SPEC_SETTING, SpecNotFound, stack_spec, stacks_of
from tests.pulumi_mocks import run_program

REPO = Path(__file__).resolve().parents[1]
PROJECT = "gpu-team"


def _run(*argv: str) -> int:
    try:
        return main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture
def team(tmp_path, monkeypatch):
    """A repository made by `gpupool init` (project gpu-team), as cwd."""
    monkeypatch.delenv("GPUPOOL_SPEC", raising=False)
    repo = tmp_path / PROJECT
    assert _run("init", str(repo)) == 0
    assert f"name: {PROJECT}" in (repo / "Pulumi.yaml").read_text()
    monkeypatch.chdir(repo)
    return repo


def test_the_commands_read_the_scaffolded_stack(team, capsys):
    assert stack_spec("dev") == "stacks/dev/spec.yaml"
    for argv in (["validate", "--stack", "dev"], ["plan", "--stack", "dev"], ["shards", "--stack", "dev"]):
        capsys.readouterr()
        assert _run(*argv) == 0, (argv, capsys.readouterr().err)
    capsys.readouterr()
    code = _run("tenant", "new", "team-b", "--tier", "standard", "--gpus", "gpu.shared=2", "--stack", "dev")
    assert code == 0, capsys.readouterr().err
    assert (team / "stacks/dev/tenants/team-b.yaml").is_file()


def test_diff_base_reads_the_scaffolded_stack(team, capsys):
    import subprocess

    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "scaffold"]):
        subprocess.run([*git, *argv], cwd=team, check=True, timeout=60)
    capsys.readouterr()
    assert _run("diff", "--base", "HEAD", "--stack", "dev") == 0, capsys.readouterr().err


def test_the_platform_stack_of_a_spec_is_found_by_its_gpupool_spec(team, capsys):
    assert stacks_of("stacks/dev/spec.yaml") == ["dev"]
    assert _run("shards", "stacks/dev/spec.yaml") == 0, capsys.readouterr().err


def test_from_a_subdirectory(team, monkeypatch):
    monkeypatch.chdir(team / "stacks" / "dev" / "tenants")
    assert Path(stack_spec("dev")).resolve() == (team / "stacks/dev/spec.yaml").resolve()


@pytest.mark.parametrize("key", ["spec", f"{PROJECT}:spec"])
def test_a_spec_in_the_projects_namespace_is_not_read_and_the_advice_names_the_programs_key(team, key, capsys):
    (team / "stacks/Pulumi.dev.yaml").write_text(f"config:\n  {key}: stacks/dev/spec.yaml\n")
    with pytest.raises(SpecNotFound) as exc:
        stack_spec("dev")
    message = str(exc.value)
    assert f"no {SPEC_SETTING} setting" in message
    assert "pulumi config set gpupool:spec PATH --stack dev" in message
    assert "project's namespace" in message
    assert _run("validate", "--stack", "dev") == 2
    assert "pulumi config set gpupool:spec PATH" in capsys.readouterr().err


def test_a_key_without_a_namespace_is_gpupools_in_a_project_named_gpupool(tmp_path, monkeypatch):
    (tmp_path / "Pulumi.yaml").write_text("name: gpupool\nruntime: python\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks/Pulumi.dev.yaml").write_text("config:\n  spec: stacks/dev/spec.yaml\n")
    monkeypatch.chdir(tmp_path)
    assert stack_spec("dev") == "stacks/dev/spec.yaml"
    # the namespaced key wins over the bare one, as it names gpupool's namespace outright
    (tmp_path / "stacks/Pulumi.dev.yaml").write_text("config:\n  spec: a.yaml\n  gpupool:spec: b.yaml\n")
    assert stack_spec("dev") == "b.yaml"


# --- the program reads what the CLI reads -----------------------------------------------------------------


def _stack_config(repo: Path, stack: str = "dev") -> dict[str, str]:
    return yaml.safe_load((repo / f"stacks/Pulumi.{stack}.yaml").read_text())["config"]


def test_the_scaffolded_program_finds_the_spec_in_a_project_named_otherwise(team):
    config = _stack_config(team)  # exactly the stack file's keys, as `pulumi up` hands them to the program
    _, _, error = run_program(
        config, stack="dev", project=PROJECT, program=lambda: runpy.run_path(str(team / "__main__.py"))
    )
    assert error is None, error


def test_the_repositorys_own_program_reads_gpupools_namespace_under_another_project_name(monkeypatch):
    monkeypatch.chdir(REPO)
    config = _stack_config(REPO)
    assert SPEC_SETTING in config
    mocks, _, error = run_program(config, stack="dev", project=PROJECT)
    assert error is None, error
    assert any(a.typ == "gpupool:index:GpuPlatform" for a in mocks.created)


def test_a_spec_the_cli_does_not_read_the_program_does_not_read_either(team):
    """The project-namespaced key the old reader looked for: the CLI refuses it, and the program stops too."""
    (team / "stacks/Pulumi.dev.yaml").write_text(f"config:\n  {PROJECT}:spec: stacks/dev/spec.yaml\n")
    with pytest.raises(SpecNotFound):
        stack_spec("dev")
    mocks, _, error = run_program(
        _stack_config(team), stack="dev", project=PROJECT, program=lambda: runpy.run_path(str(team / "__main__.py"))
    )
    assert error is not None and "gpupool:spec" in str(error)
    assert not mocks.created
