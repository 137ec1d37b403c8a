"""The exit-code table (docs/reference/cli.md, "CLI conventions"), for every command: 0 ok; 1 invalid spec / does not fit /
negative headroom; 2 usage error (unknown argument, missing file, unknown GPU model or MIG profile);
70 internal error. Each row runs the real CLI in-process on a copy of the repository's stacks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpupool.cli import main as cli
from gpupool.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
DEV = "stacks/dev/spec.yaml"
BAD = "bad.yaml"  # schema-invalid spec
OVER = "over/spec.yaml"  # valid YAML, tenants granted more than the pools supply
NOPE = "missing.yaml"


@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in ("stacks", "schemas"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / BAD).write_text("apiVersion: gpupool.dev/v1alpha1\nkind: GpuPlatform\nnodePools: 3\n")
    shutil.copytree(ROOT / "stacks/dev", tmp_path / "over")
    t = tmp_path / "over/tenants/notebooks.yaml"
    t.write_text(t.read_text().replace("nvidia.com/mig-1g.10gb: 6", "nvidia.com/mig-1g.10gb: 60"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUPOOL_SPEC", raising=False)
    return tmp_path


def _render(spec):
    return ["render", spec, "--output-dir", "out"]


TABLE = [
    # command                                       argv                                                   code
    ("validate ok", ["validate", DEV], 0),
    ("validate invalid", ["validate", BAD], 1),
    ("validate missing file", ["validate", NOPE], 2),
    ("validate unknown flag", ["validate", DEV, "--bogus"], 2),
    ("plan ok", ["plan", DEV], 0),
    ("plan invalid", ["plan", BAD], 1),
    ("plan missing file", ["plan", NOPE], 2),
    ("plan unknown stack", ["plan", "--stack", "qa"], 2),
    ("plan unknown format", ["plan", DEV, "-o", "yaml"], 2),
    ("usage invalid", ["usage", BAD, "--prometheus", "http://127.0.0.1:9"], 1),
    ("usage missing file", ["usage", NOPE, "--prometheus", "http://127.0.0.1:9"], 2),
    ("usage without --prometheus", ["usage", DEV, "--prometheus", ""], 2),
    ("usage bad --since", ["usage", DEV, "--prometheus", "http://127.0.0.1:9", "--since", "a week"], 2),
    ("usage Prometheus unreachable", ["usage", DEV, "--prometheus", "http://127.0.0.1:9"], 1),
    ("diff ok", ["diff", DEV, DEV], 0),
    ("diff HEAD invalid", ["diff", DEV, BAD], 1),
    ("diff missing file", ["diff", DEV, NOPE], 2),
    ("diff unknown flag", ["diff", DEV, DEV, "--bogus"], 2),
    ("render ok", _render(DEV), 0),
    ("render invalid", _render(BAD), 1),
    ("render missing file", _render(NOPE), 2),
    ("render unknown flag", _render(DEV) + ["--bogus"], 2),
    ("shards ok", ["shards", DEV], 0),
    ("shards invalid", ["shards", BAD], 1),
    ("shards missing file", ["shards", NOPE], 2),
    ("shards missing states dir", ["shards", DEV, "--states", NOPE], 2),
    ("mig models ok", ["mig", "models"], 0),
    ("mig check fits", ["mig", "check", "--gpu", "H100-80GB", "1g.10gb=7"], 0),
    ("mig check does not fit", ["mig", "check", "--gpu", "H100-80GB", "4g.40gb=1", "2g.20gb=2"], 1),
    ("mig check unknown model", ["mig", "check", "--gpu", "H100-80G-X", "1g.10gb=1"], 2),
    ("mig check model without MIG", ["mig", "check", "--gpu", "L4", "1g.10gb=1"], 2),
    ("mig check unknown profile", ["mig", "check", "--gpu", "H100-80GB", "1g.12gb=1"], 2),
    ("mig profiles ok", ["mig", "profiles", "--gpu", "A30"], 0),
    ("mig profiles model without MIG", ["mig", "profiles", "--gpu", "L4"], 2),
    ("mig suggest ok", ["mig", "suggest", "--gpu", "H100-80GB", "1g.10gb=9"], 0),
    ("mig suggest unknown profile", ["mig", "suggest", "--gpu", "H100-80GB", "1g.12gb=9"], 2),
    ("mig suggest huge demand", ["mig", "suggest", "--gpu", "H100-80GB", "1g.10gb=" + "9" * 14], 2),
    (
        "mig suggest does not fit a node",
        ["mig", "suggest", "--gpu", "H100-80GB", "--gpus-per-node", "1", "7g.80gb=1", "4g.40gb=1"],
        1,
    ),
    ("mig suggest spec ok", ["mig", "suggest", "--stack", "dev", "--pool", "a100-mig"], 0),
    ("mig suggest spec invalid", ["mig", "suggest", "--spec", BAD, "--pool", "a100-mig"], 1),
    ("mig suggest spec missing file", ["mig", "suggest", "--spec", NOPE, "--pool", "a100-mig"], 2),
    ("mig suggest unknown pool", ["mig", "suggest", "--stack", "dev", "--pool", "nope"], 2),
    ("tenant new ok (only placeholders)", ["tenant", "new", "vision", "--tier", "standard", "--stack", "dev"], 0),
    (
        "tenant new breaks capacity",
        ["tenant", "new", "big", "--tier", "standard", "--gpus", "1g.10gb=99", "--stack", "dev"],
        1,
    ),
    ("tenant new missing file", ["tenant", "new", "vision", "--tier", "standard", NOPE], 2),
    ("tenant new unknown tier", ["tenant", "new", "vision", "--tier", "gold", "--stack", "dev"], 2),
    ("tenant new existing tenant", ["tenant", "new", "research", "--tier", "batch", "--stack", "dev"], 2),
    ("init not empty", ["init", "stacks"], 2),
    ("init bad stack name", ["init", "new-repo", "--stack", "Dev_1"], 2),
    ("stacks unknown op", ["stacks", "apply", "dev"], 2),
    ("stacks no project", ["stacks", "preview", "dev", "--project-dir", NOPE], 2),
    ("stacks bad config", ["stacks", "preview", "dev", "-c", "novalue"], 2),
    ("schema ok", ["schema"], 0),
    ("schema unknown flag", ["schema", "--bogus"], 2),
    ("completion ok", ["completion", "bash"], 0),
    ("completion unknown shell", ["completion", "fish"], 2),
    ("no command", [], 2),
    ("unknown command", ["frobnicate"], 2),
]


def _code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse usage errors
        return exc.code


def _render_migrated() -> bool:
    text = cli.build_parser()._subparsers._group_actions[0].choices["render"].format_help()
    return "--output-dir" in text


@pytest.mark.parametrize("argv,code", [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_exit_code(project, capsys, argv, code):
    if argv[:1] == ["render"] and not _render_migrated():
        pytest.skip("render's --output-dir lands with issue 10's render work; until then its flag is -o")
    assert _code(argv) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err


def test_negative_headroom_is_1(project, capsys):
    # plan and diff exit 1 when a resource's headroom is negative (validate reports it as an error: 1)
    assert _code(["plan", OVER]) == 1
    assert _code(["diff", DEV, OVER]) == 1


def test_every_command_is_in_the_table():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    covered = {row[1][0] for row in TABLE if row[1]}
    assert set(sub.choices) <= covered, set(sub.choices) - covered


@pytest.mark.parametrize("command", ["validate", "plan", "mig"])
def test_internal_error_is_70(project, capsys, monkeypatch, command):
    def boom(args):
        raise RuntimeError("simulated bug")

    real = cli.build_parser

    def patched(*a, **k):
        p = real(*a, **k)
        for action in p._subparsers._group_actions[0].choices.values():
            action.set_defaults(func=boom)
            for sub in (
                getattr(action, "_subparsers", None)._group_actions[0].choices.values()
                if getattr(action, "_subparsers", None)
                else ()
            ):
                sub.set_defaults(func=boom)
        return p

    monkeypatch.setattr(cli, "build_parser", patched)
    argv = {"validate": ["validate", DEV], "plan": ["plan", DEV], "mig": ["mig", "models"]}[command]
    assert main(argv) == 70
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: simulated bug" in err and "Traceback" not in err
