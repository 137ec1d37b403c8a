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


# Commands whose output is not a report: render writes files (or a YAML stream with `--output-dir -`), init a
# repository, schema prints the JSON Schema itself, completion a shell script.
NOT_A_REPORT = {"render", "init", "schema", "completion"}


def _leaf_commands():
    from gpupool.cli.main import _subcommands, build_parser

    for command in _subcommands(build_parser()):
        has_sub = any(isinstance(a, __import__("argparse")._SubParsersAction) for a in command._actions)
        if not has_sub:
            yield command.prog.removeprefix("gpupool "), command


def test_every_command_with_output_takes_o_json():
    """Issue 21 item 6: `-o json` on every command that prints a report, spelt as everywhere (`-o/--output`,
    `--format` kept as the hidden alias), so that a command added later without it fails here."""
    leaves = dict(_leaf_commands())
    assert {"mig suggest", "tenant new", "stacks", "validate", "diff"} <= set(leaves)
    missing = []
    for name, parser in leaves.items():
        if name.split()[0] in NOT_A_REPORT:
            continue
        flags = {opt: a for a in parser._actions for opt in a.option_strings}
        if not ("-o" in flags and "--output" in flags and "json" in (flags["-o"].choices or ())):
            missing.append(name)
        elif "--format" not in flags or flags["--format"].dest != flags["-o"].dest:
            missing.append(f"{name} (--format alias)")
    assert not missing, missing


def test_mig_suggest_o_json_explicit(capsys):
    import json

    argv = ["mig", "suggest", "--gpu", "A100-80GB", "1g.10gb=5", "3g.40gb=3"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert main([*argv, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert text.startswith(f"A100-80GB: {doc['gpus']} GPUs needed (proven minimum")
    assert doc["demand"] == {"1g.10gb": 5, "3g.40gb": 3} and doc["optimal"] is True
    assert sum(g["gpus"] for g in doc["layouts"]) == doc["gpus"]
    assert all(doc["supplied"][p] >= n for p, n in doc["demand"].items())
    assert doc["perNode"] is None and len(doc["fragments"]) == 1 and doc["fragments"][0]["text"] in text


def test_mig_suggest_o_json_per_node_and_usage_errors(capsys):
    import json

    argv = ["mig", "suggest", "--gpu", "A100-80GB", "1g.10gb=9", "--gpus-per-node", "2", "-o", "json"]
    assert main(argv) == 0
    per_node = json.loads(capsys.readouterr().out)["perNode"]
    assert per_node["gpusPerNode"] == 2 and len(per_node["perGpu"]) == 2
    assert per_node["supplied"]["1g.10gb"] >= 9 and per_node["gpus"] == 2 * per_node["nodes"]
    assert main(["mig", "suggest", "--gpu", "A100-80GB", "9g.99gb=1", "-o", "json"]) == 2
    out, err = capsys.readouterr()
    # a usage error prints no half document: the JSON error object (docs/reference/cli.md, "Errors") and the error line
    assert json.loads(out)["kind"] == "Error" and json.loads(out)["exitCode"] == 2 and "error:" in err


def test_mig_suggest_o_json_spec_mode(project, capsys):
    import json

    assert main(["mig", "suggest", "--pool", "a100-mig", "stacks/dev/spec.yaml"]) == 0
    text = capsys.readouterr().out
    assert main(["mig", "suggest", "--pool", "a100-mig", "--stack", "dev", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["spec"] == "stacks/dev/spec.yaml" and doc["pool"]["name"] == "a100-mig"
    granted = {row["resource"]: row["granted"] for row in doc["derived"]}
    for resource, n in granted.items():
        assert f"  {resource}: granted {n}" in text
    c = doc["comparison"]
    assert f"suggested:       {c['suggestedGpus']} GPU" in text
    assert f"needed now:      {c['neededNodesNow']} node" in text
    assert c["repartitionsInUse"] == ("re-partitions pool a100-mig" in text)


def test_mig_suggest_spec_is_positional_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["mig", "suggest", "--help"])
    out = capsys.readouterr().out
    assert "--spec" not in out and "[PROFILE=COUNT|SPEC ...]" in out  # --spec still works, unadvertised


def test_tenant_new_o_json(project, capsys):
    import json

    argv = ["tenant", "new", "vision", "--tier", "standard", "--gpus", "gpu.shared=2", "--stack", "dev", "-o", "json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["created"] == "stacks/dev/tenants/vision.yaml" and (project / doc["created"]).is_file()
    assert doc["tenant"] == "vision" and doc["spec"] == "stacks/dev/spec.yaml"
    assert {d["rule"] for d in doc["diagnostics"]} == {"GP590"}  # only the placeholders
    assert doc["nextSteps"][0].startswith("edit stacks/dev/tenants/vision.yaml: set owners")
    assert doc["nextSteps"][-1] == "git add stacks/dev/tenants/vision.yaml and open the pull request"


def test_tenant_new_o_json_when_nothing_is_written(project, capsys):
    import json

    argv = ["tenant", "new", "vision", "--tier", "production", "--gpus", "h100=1", "--stack", "dev", "-o", "json"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["created"] is None and doc["nextSteps"] == []
    blamed = [d for d in doc["diagnostics"] if d["rule"] == "GP503"]
    assert blamed and blamed[0]["file"] == "stacks/dev/tenants/vision.yaml"
    assert "not written" in err and not (project / "stacks/dev/tenants/vision.yaml").exists()


def test_stacks_output_flag_is_spelt_as_elsewhere():
    from gpupool.cli.main import build_parser

    assert build_parser().parse_args(["stacks", "preview", "dev", "--format", "json"]).output == "json"
    assert build_parser().parse_args(["stacks", "preview", "dev", "-o", "json"]).output == "json"


@pytest.mark.parametrize(
    "argv",
    [
        ["mig", "suggest", "--gpu", "A100-80GB", "1g.10gb=1", "--color", "never", "-o", "json"],
        ["tenant", "new", "vision", "--tier", "standard", "--stack", "dev", "--color", "never"],
        ["shards", "--stack", "dev", "--color", "never", "-o", "json"],
        ["plan", "--stack", "dev", "--color", "never", "-o", "json"],
    ],
)
def test_global_options_after_any_command(project, argv, capsys):
    assert main(argv) == 0
