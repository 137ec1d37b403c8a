"""CLI conventions shared by every command (README "CLI conventions")."""
from __future__ import annotations

import argparse

import pytest

from gpupool.cli.common import add_output_format


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t")
    add_output_format(p, ("text", "json"), "text")
    return p


@pytest.mark.parametrize("argv,expected", [
    ([], "text"), (["-o", "json"], "json"), (["--output", "json"], "json"), (["--output=json"], "json"),
    (["-ojson"], "json"), (["--format", "json"], "json"), (["--format=json"], "json"),
])
def test_output_flag_and_hidden_format_alias(argv, expected):
    assert _parser().parse_args(argv).output == expected


def test_format_alias_is_hidden_from_help():
    text = _parser().format_help()
    assert "-o FORMAT, --output FORMAT" in text
    assert "--format" not in text


def test_output_rejects_unknown_format(capsys):
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["-o", "yaml"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


# --- which spec a command reads: SPEC, `-`, --stack, $GPUPOOL_SPEC, ./spec.yaml -------------------------

import io  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

from gpupool.cli.main import main  # noqa: E402
from gpupool.spec.stack import SpecNotFound, resolve, stack_spec  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of the repository's Pulumi project files and the dev stack, as cwd."""
    shutil.copy(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(REPO / "stacks", tmp_path / "stacks")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUPOOL_SPEC", raising=False)
    return tmp_path


def test_stack_reads_gpupool_spec_from_the_stack_config_dir(project):
    assert stack_spec("dev") == "stacks/dev/spec.yaml"
    (project / "stacks/Pulumi.dev.yaml").write_text("config:\n  gpupool:spec: stacks/prod/spec.yaml\n")
    assert stack_spec("dev") == "stacks/prod/spec.yaml"


def test_stack_path_is_relative_to_the_project_not_the_cwd(project, monkeypatch):
    monkeypatch.chdir(project / "stacks" / "dev" / "tenants")
    assert Path(stack_spec("prod")).resolve() == (project / "stacks/prod/spec.yaml").resolve()


@pytest.mark.parametrize("setup,stack,message", [
    (lambda p: None, "qa", "no stacks/Pulumi.qa.yaml; stacks: dev, prod"),
    (lambda p: (p / "stacks/Pulumi.dev.yaml").write_text("config:\n  gpupool:kubeconfig: x\n"), "dev",
     "no gpupool:spec setting"),
    (lambda p: (p / "Pulumi.yaml").unlink(), "dev", "no Pulumi.yaml"),
    (lambda p: None, "../etc", "give a stack name"),
])
def test_stack_errors_say_what_is_missing(project, setup, stack, message):
    setup(project)
    with pytest.raises(SpecNotFound) as exc:
        stack_spec(stack)
    assert message in str(exc.value)


def test_resolution_order(project, monkeypatch):
    assert resolve("stacks/prod/spec.yaml", None) == "stacks/prod/spec.yaml"
    assert resolve(None, "dev") == "stacks/dev/spec.yaml"
    monkeypatch.setenv("GPUPOOL_SPEC", "stacks/prod/spec.yaml")
    assert resolve(None, None) == "stacks/prod/spec.yaml"
    assert resolve(None, "dev") == "stacks/dev/spec.yaml"  # an explicit flag beats the environment
    monkeypatch.delenv("GPUPOOL_SPEC")
    with pytest.raises(SpecNotFound, match=r"spec.yaml: no such file .*GPUPOOL_SPEC"):
        resolve(None, None)
    monkeypatch.chdir(project / "stacks" / "dev")
    assert resolve(None, None) == "spec.yaml"
    assert resolve("-", None) == "-"
    with pytest.raises(SpecNotFound, match="not both"):
        resolve("spec.yaml", "dev")


def test_plan_with_stack_and_env(project, monkeypatch, capsys):
    assert main(["plan", "--stack", "prod", "-o", "json"]) == 0
    assert '"cluster": "prod-eu1"' in capsys.readouterr().out
    monkeypatch.setenv("GPUPOOL_SPEC", "stacks/dev/spec.yaml")
    assert main(["plan", "-o", "json"]) == 0
    assert '"cluster": "dev"' in capsys.readouterr().out
    assert main(["plan", "--stack", "qa"]) == 2
    assert "no stacks/Pulumi.qa.yaml" in capsys.readouterr().err


def test_stdin_spec_resolves_tenant_files_from_the_cwd(project, monkeypatch, capsys):
    text = (project / "stacks/dev/spec.yaml").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text)))
    monkeypatch.chdir(project / "stacks" / "dev")
    assert main(["plan", "-", "-o", "json"]) == 0
    out = capsys.readouterr().out
    assert '"cluster": "dev"' in out and '"name": "notebooks"' in out
    # from another directory the same stdin finds no tenants/: located at <stdin>, exit 1
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text)))
    monkeypatch.chdir(project)
    assert main(["plan", "-"]) == 1
    err = capsys.readouterr().err
    assert "<stdin>:" in err and "tenantFiles[0]" in err and "<stdin>: invalid, no plan" in err
