"""Every command that has `-o json` answers a failure with one JSON error object on stdout (docs/reference/cli.md,
"Errors") and the usual `error: MESSAGE` line on stderr (issue 34): scripts parse stdout, and an empty one is
no answer. A command that prints its own document on a failure of its input (validate's findings, diff's
invalid-side report, mig check's `fits: false`, a per-node split that fails) keeps doing so; the error object
is for failures where no document could be produced. Also `shards --states` with files of another shape,
FIFOs and devices: one line naming the file, exit 2, never a hang or a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpupool.cli import main as cli
from gpupool.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
DEV = "stacks/dev/spec.yaml"
BAD = "bad.yaml"  # schema-invalid spec
NOPE = "missing.yaml"


@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in ("stacks", "schemas"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / BAD).write_text("apiVersion: gpupool.dev/v1alpha1\nkind: GpuPlatform\nnodePools: 3\n")
    (tmp_path / "states").mkdir()
    (tmp_path / "states" / "dev.json").write_text("[]")  # another shape: a list
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "link")
    monkeypatch.chdir(tmp_path)
    for var in ("GPUPOOL_SPEC", "PULUMI_BACKEND_URL"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def _linked_tenants(project: Path) -> None:
    """The dev stack's tenant directory replaced by a link: `tenant new` must not write through it."""
    tenants = project / "stacks/dev/tenants"
    shutil.move(tenants, project / "outside" / "tenants")
    os.symlink(project / "outside" / "tenants", tenants)


# (id, argv, exit code, setup)
TABLE = [
    ("validate missing file", ["validate", NOPE], 2, None),
    ("validate a directory", ["validate", "stacks"], 2, None),
    ("plan missing file", ["plan", NOPE], 2, None),
    ("plan invalid spec", ["plan", BAD], 1, None),
    ("plan unknown stack", ["plan", "--stack", "qa"], 2, None),
    ("usage missing file", ["usage", NOPE, "--prometheus", "http://127.0.0.1:9"], 2, None),
    ("diff missing file", ["diff", DEV, NOPE], 2, None),
    ("diff one spec without --base", ["diff", DEV], 2, None),
    ("diff --preview-file missing", ["diff", DEV, DEV, "--preview-file", NOPE], 2, None),
    ("diff --full-output through a link", ["diff", DEV, DEV, "--full-output", "link/full.txt"], 1, None),
    ("mig check unknown model", ["mig", "check", "--gpu", "H100-80G-X", "1g.10gb=1"], 2, None),
    ("mig check malformed pair", ["mig", "check", "--gpu", "H100-80GB", "1g.10gb"], 2, None),
    ("mig profiles without MIG", ["mig", "profiles", "--gpu", "L4"], 2, None),
    ("mig suggest unknown profile", ["mig", "suggest", "--gpu", "H100-80GB", "1g.12gb=9"], 2, None),
    ("mig suggest no demand", ["mig", "suggest", "--gpu", "H100-80GB"], 2, None),
    ("mig suggest spec invalid", ["mig", "suggest", "--spec", BAD, "--pool", "a100-mig"], 1, None),
    ("mig suggest unknown pool", ["mig", "suggest", "--stack", "dev", "--pool", "nope"], 2, None),
    ("tenant new missing file", ["tenant", "new", "vision", "--tier", "standard", NOPE], 2, None),
    ("tenant new unknown tier", ["tenant", "new", "vision", "--tier", "gold", "--stack", "dev"], 2, None),
    ("tenant new through a link", ["tenant", "new", "vision", "--tier", "standard", DEV], 1, _linked_tenants),
    ("shards missing file", ["shards", NOPE], 2, None),
    ("shards invalid spec", ["shards", BAD, "--platform-stack", "dev"], 1, None),
    ("shards states of another shape", ["shards", DEV, "--states", "states"], 2, None),
    ("shards missing states dir", ["shards", DEV, "--states", NOPE], 2, None),
    ("stacks without a backend", ["stacks", "preview", "dev"], 2, None),
]
# `mig models` takes no argument and reads only the packaged catalog: nothing it is given can fail.
CANNOT_FAIL = {"mig models"}


def _json_commands() -> set[str]:
    """Every command (and sub-command) whose -o takes json."""
    found = set()

    def walk(parser, prefix):
        for action in parser._actions:  # argparse has no public way to list these
            if action.dest == "output" and action.choices and "json" in action.choices:
                found.add(prefix)
            if action.__class__.__name__ == "_SubParsersAction":
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())

    walk(cli.build_parser(), "")
    return found


def _command(argv: list[str]) -> str:
    return " ".join(argv[:2]) if argv[0] == "mig" or argv[:2] == ["tenant", "new"] else argv[0]


def test_every_command_with_json_output_is_in_the_table():
    covered = {_command(argv) for _, argv, _, _ in TABLE}
    assert _json_commands() - CANNOT_FAIL <= covered, _json_commands() - CANNOT_FAIL - covered


@pytest.mark.parametrize("argv,code,setup", [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_a_failure_under_o_json_is_one_json_error_object(project, capsys, argv, code, setup):
    if setup:
        setup(project)
    try:
        got = main([*argv, "-o", "json"])
    except SystemExit as exc:  # argparse refused the arguments themselves
        got = exc.code
    out, err = capsys.readouterr()
    assert got == code, err
    doc = json.loads(out)  # exactly one JSON document, nothing else on stdout
    assert isinstance(doc, dict), out
    assert doc["kind"] == "Error" and doc["apiVersion"] == "gpupool.dev/v1alpha1", doc
    assert doc["exitCode"] == code and doc["command"] == _command(argv)  # as typed, subcommand included
    assert doc["reason"] == ("UsageError" if code == 2 else "Failed")
    assert doc["message"] and "\n" not in doc["message"]
    assert f"error: {doc['message']}" in err.splitlines(), err  # the usual line on stderr, the same words
    assert "Traceback" not in err and "internal error" not in err
    assert not list((project / "outside").rglob("vision.yaml")) and not (project / "outside" / "full.txt").exists()


@pytest.mark.parametrize(
    "argv,code",
    [
        (["validate", BAD], 1),  # the findings are the document
        (["mig", "check", "--gpu", "H100-80GB", "4g.40gb=1", "2g.20gb=2"], 1),  # fits: false
        (["diff", DEV, BAD], 1),  # the invalid side is reported in the diff document
    ],
)
def test_a_failure_of_the_input_keeps_its_own_document(project, capsys, argv, code):
    assert main([*argv, "-o", "json"]) == code
    doc = json.loads(capsys.readouterr().out)
    assert not (isinstance(doc, dict) and doc.get("kind") == "Error"), doc


def test_text_output_prints_no_json_error(project, capsys):
    assert main(["plan", NOPE]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "error: missing.yaml: no such file\n"


# ---------------------------------------------------------------- shards --states: hostile files


def _shards(project: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpupool", "shards", DEV, "--states", "states", *extra],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang only; nothing here is timed
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


SHAPES = {
    "a list": "[]",
    "a string": '"dev"',
    "a number": "3",
    "deployment a string": '{"deployment": "x"}',
    "resources an object": '{"deployment": {"resources": {"urn": "u"}}}',
    "a resource a number": '{"deployment": {"resources": [1]}}',
    "an operation's resource a list": '{"deployment": {"pending_operations": [{"resource": [1]}]}}',
    "nested too deep": "[" * 100000 + "]" * 100000,
    "not JSON": "{",
}


@pytest.mark.parametrize("text", SHAPES.values(), ids=SHAPES.keys())
def test_a_state_of_another_shape_is_one_line_naming_the_file(project, text):
    (project / "states" / "dev.json").write_text(text)
    p = _shards(project, "-o", "json")
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: --states: states/dev.json: "), p.stderr
    assert "pulumi stack export" in p.stderr
    assert json.loads(p.stdout)["kind"] == "Error"


def test_a_state_that_is_not_utf8_is_refused(project):
    (project / "states" / "dev.json").write_bytes(b'{"deployment": "\xff"}')
    p = _shards(project)
    assert p.returncode == 2 and "states/dev.json: not UTF-8" in p.stderr, p.stderr


@pytest.mark.parametrize("kind", ["fifo", "zero", "directory"])
def test_a_fifo_a_device_or_a_directory_among_the_states_is_refused_unread(project, tmp_path, kind):
    target = project / "states" / "dev.json"
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)  # nobody writes: reading it would wait for ever
    elif kind == "zero":
        os.symlink("/dev/zero", target)  # endless: reading it would fill the memory
    else:
        target.mkdir()
    p = _shards(project, "-o", "json")
    assert p.returncode == 2, p.stderr
    assert (
        p.stderr
        == "error: --states: states/dev.json: not a regular file (a directory, a FIFO or a device); remove it from DIR\n"
    )
    assert json.loads(p.stdout)["exitCode"] == 2


def test_a_well_formed_state_is_still_read(project):
    urn = "urn:pulumi:dev::gpupool::gpupool:tenancy:Tenant::tenant-research"
    doc = {"deployment": {"resources": [{"urn": urn, "type": "gpupool:tenancy:Tenant"}]}}
    (project / "states" / "dev.json").write_text(json.dumps(doc))
    p = _shards(project, "-o", "json")
    assert p.returncode == 0, p.stderr
    assert "research" in p.stdout
