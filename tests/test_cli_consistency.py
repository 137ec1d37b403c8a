"""The CLI conventions hold on every command (issue 21): `--stack` and a positional SPEC, global options after
the command, no placeholder where a stack name belongs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpupool.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in ("stacks", "schemas"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUPOOL_SPEC", raising=False)
    return tmp_path


def test_diff_takes_stack(project, capsys):
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    assert main(["diff", "--base", "HEAD", "--stack", "dev", "--exit-code"]) == 0
    assert "no changes" in capsys.readouterr().out


def test_mig_suggest_takes_a_positional_spec(project, capsys):
    assert main(["mig", "suggest", "--pool", "a100-mig", "stacks/dev/spec.yaml"]) == 0
    positional = capsys.readouterr().out
    assert main(["mig", "suggest", "--pool", "a100-mig", "--stack", "dev"]) == 0
    by_stack = capsys.readouterr().out
    assert "demand derived from stacks/dev/spec.yaml" in positional
    assert positional.splitlines()[:3] == by_stack.splitlines()[:3]  # (the solve time differs)


def test_shards_names_the_real_stack(project, capsys):
    assert main(["shards", "stacks/dev/spec.yaml"]) == 0
    out = capsys.readouterr().out
    assert "stack dev holds" in out and "STACK  ROLE" in out  # the header, not a stack called STACK
    assert "\nSTACK " not in out.split("STACK  ROLE", 1)[1]
    other = project / "stacks/dev/other.yaml"
    shutil.copy(project / "stacks/dev/spec.yaml", other)
    assert main(["shards", str(other)]) == 2  # no stack names it: say so instead of inventing one
    assert "--platform-stack" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["validate", "--stack", "dev", "--color", "never"], ["--color", "never", "validate", "--stack", "dev"]]
)
def test_global_options_before_or_after_the_command(project, argv, capsys):
    assert main(argv) == 0


def test_mig_commands_take_o_json(capsys):
    import json

    assert main(["mig", "models", "-o", "json"]) == 0
    models = json.loads(capsys.readouterr().out)
    assert {m["name"] for m in models if m["mig"]} >= {"A100-80GB", "H100-80GB"}
    assert main(["mig", "profiles", "--gpu", "A100-80GB", "-o", "json"]) == 0
    profiles = json.loads(capsys.readouterr().out)
    assert "1g.10gb" in [p["name"] for p in profiles["profiles"]] and "all-balanced" in profiles["presets"]
    assert main(["mig", "check", "--gpu", "A100-80GB", "1g.10gb=2", "3g.40gb=1", "-o", "json"]) == 0
    fits = json.loads(capsys.readouterr().out)
    assert fits["fits"] is True and len(fits["placements"]) == 3
    assert main(["mig", "check", "--gpu", "A100-80GB", "7g.80gb=2", "-o", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["fits"] is False
