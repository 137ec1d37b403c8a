"""`gpupool stacks` against a careless or hostile setup (issue 34): destroy acts only on a stack that exists,
the torn-sidecar repair follows no link, and a missing pulumi CLI, a failing `stack select` or a refused
passphrase is one clear line (and a JSON outcome under `-o json`) in which no credential appears.

The pulumi CLI is faked at the subprocess layer: a script named `pulumi` on PATH that answers `version`,
`stack select`, `stack init`, `stack ls --json` and `config` as pulumi does (pulumi/automation/_cmd.py runs
it; errors.py create_command_error turns "no stack named ... found" into StackNotFoundError), so the
Automation API's own code runs unchanged. It records every call, so a test can assert that nothing was
created.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("pulumi")

from gpupool import redact  # noqa: E402
from gpupool.cli.main import main  # noqa: E402
from gpupool.deploy import recovery, secret_env, stacks  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CANARY_PASSPHRASE = "canary-passphrase-7f3a9c"
CANARY_TOKEN = "pul-canary-token-19d4e2"
CANARY_AWS = "canary/aws+secret+key/0b8e"
CANARY_SESSION = "canary-session-token-5c21"
CANARY_URL_PASSWORD = "canary-url-password-33aa"
CANARY_URL_TOKEN = "canary-url-token-8e1f"

FAKE_PULUMI = """\
#!{python}
# A stand-in for the pulumi CLI: enough of `version`, `stack` and `config` for the Automation API.
import json, os, sys

args = [a for a in sys.argv[1:] if a != "--non-interactive"]
state = os.environ["FAKE_PULUMI_DIR"]
with open(os.path.join(state, "calls.jsonl"), "a") as log:
    log.write(json.dumps(args) + "\\n")
stacks_file = os.path.join(state, "stacks.json")
stacks = json.load(open(stacks_file)) if os.path.exists(stacks_file) else []
leak = " ".join(os.environ.get(k, "") for k in (
    "PULUMI_CONFIG_PASSPHRASE", "PULUMI_ACCESS_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "PULUMI_BACKEND_URL"))

def fail(text):
    sys.stderr.write(text + "\\n")
    sys.exit(255)

if args == ["version"]:
    print("v3.274.1")
elif args[:2] == ["stack", "select"]:
    name = args[args.index("--stack") + 1]
    if os.environ.get("FAKE_PULUMI_SELECT_ERROR"):
        fail("error: " + os.environ["FAKE_PULUMI_SELECT_ERROR"] + " (" + leak + ")")
    if name not in stacks:
        fail("error: no stack named '" + name + "' found")
elif args[:2] == ["stack", "init"]:
    if os.environ.get("FAKE_PULUMI_INIT_ERROR"):
        fail("error: " + os.environ["FAKE_PULUMI_INIT_ERROR"] + " (" + leak + ")")
    stacks.append(args[2])
    json.dump(stacks, open(stacks_file, "w"))
elif args[:3] == ["stack", "ls", "--json"]:
    print(json.dumps([{{"name": n, "current": False}} for n in stacks]))
elif args[:1] == ["config"]:
    if os.environ.get("PULUMI_CONFIG_PASSPHRASE") != os.environ.get("FAKE_PULUMI_PASSPHRASE"):
        # pkg/secrets/passphrase/manager.go ErrIncorrectPassphrase; the rest is a hostile echo
        fail("error: getting stack configuration: incorrect passphrase (" + leak + ")")
    print("{{}}")
else:
    fail("error: fake pulumi cannot " + " ".join(args[:2]) + " (" + leak + ")")
"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project directory (Pulumi.yaml, its virtualenv, the dev stack's spec) as the current directory, a fake
    pulumi first on PATH and a file backend whose URL carries a password and a token."""
    d = tmp_path / "project"
    (d / "venv" / "bin").mkdir(parents=True)
    os.symlink(shutil.which("python3") or "/usr/bin/python3", d / "venv" / "bin" / "python")
    (d / "Pulumi.yaml").write_text("name: p\nruntime:\n  name: python\n  options:\n    virtualenv: venv\n")
    shutil.copytree(REPO / "stacks" / "dev", d / "dev")
    (d / "Pulumi.dev.yaml").write_text("config:\n  gpupool:spec: dev/spec.yaml\n")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "pulumi").write_text(FAKE_PULUMI.format(python=sys.executable))
    (fake / "pulumi").chmod(0o755)
    state = tmp_path / "fake-pulumi"
    state.mkdir()
    (state / "stacks.json").write_text(json.dumps(["dev", "prod"]))
    monkeypatch.setenv("FAKE_PULUMI_DIR", str(state))
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv(
        "PULUMI_BACKEND_URL",
        f"file://ci:{CANARY_URL_PASSWORD}@localhost{tmp_path / 'state'}?access_token={CANARY_URL_TOKEN}",
    )
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", CANARY_PASSPHRASE)
    monkeypatch.setenv("FAKE_PULUMI_PASSPHRASE", CANARY_PASSPHRASE)
    monkeypatch.setenv("PULUMI_ACCESS_TOKEN", CANARY_TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CANARY_AWS)
    monkeypatch.setenv("AWS_SESSION_TOKEN", CANARY_SESSION)
    monkeypatch.delenv("GPUPOOL_SINGLE_WRITER", raising=False)
    monkeypatch.chdir(d)
    redact.forget_all()
    yield d
    redact.forget_all()


CANARIES = (CANARY_PASSPHRASE, CANARY_TOKEN, CANARY_AWS, CANARY_SESSION, CANARY_URL_PASSWORD, CANARY_URL_TOKEN)


def _calls() -> list[list[str]]:
    log = Path(os.environ["FAKE_PULUMI_DIR"]) / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _stacks_there() -> list[str]:
    return json.loads((Path(os.environ["FAKE_PULUMI_DIR"]) / "stacks.json").read_text())


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["stacks", *argv])
    out, err = capsys.readouterr()
    for canary in CANARIES:
        assert canary not in out + err, (canary, out, err)
    return code, out, err


def _settings(project: Path, **kw) -> stacks.Settings:
    logs: list[str] = kw.pop("logs", [])
    return stacks.Settings(
        project_dir=project,
        backend_url=os.environ["PULUMI_BACKEND_URL"],
        log=logs.append,
        output=lambda _: None,
        **kw,
    )


# ---------------------------------------------------------------- destroy acts only on what exists


def test_destroy_of_a_mistyped_stack_creates_nothing_and_names_the_stacks_there(project, capsys):
    code, out, err = _run(capsys, "destroy", "devv", "-o", "json")
    assert code == 1
    assert _stacks_there() == ["dev", "prod"]  # nothing created
    assert not [c for c in _calls() if c[:2] == ["stack", "init"]], _calls()
    assert not [c for c in _calls() if c[:1] == ["destroy"]], _calls()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert "no stack devv in file://localhost" in errors[0] and "stacks there: dev, prod" in errors[0], err
    assert "Traceback" not in err
    (outcome,) = json.loads(out)  # the JSON outcome: the stack that failed, and why
    assert (outcome["stack"], outcome["op"], outcome["result"]) == ("devv", "destroy", "failed")
    assert "no stack devv" in outcome["note"] and "stacks there: dev, prod" in outcome["note"]


def test_the_unknown_stack_message_holds_no_credential_of_the_backend_url(project):
    """The first line of defence: nothing registered, the message itself names the backend without its
    userinfo or query (redact.url_for_display)."""
    platform = stacks.Platform(_settings(project), "devv")
    with pytest.raises(stacks.StackError) as err:
        platform.run("destroy")
    text = str(err.value) + json.dumps([o.__dict__ for o in platform.outcomes])
    assert "no stack devv in file://localhost" in text
    for canary in CANARIES:
        assert canary not in text
    assert _stacks_there() == ["dev", "prod"]


def test_preview_and_up_still_create_a_first_stack(project):
    """A first deploy's pull request previews a stack that does not exist yet: preview and up create it
    (pulumi stack init), destroy never does."""
    platform = stacks.Platform(_settings(project), "qa")
    platform.select("qa")  # create_or_select, as preview and up do
    assert "qa" in _stacks_there()
    with pytest.raises(Exception) as err:
        platform.select("staging", create=False)
    assert type(err.value).__name__ == "StackNotFoundError"
    assert "staging" not in _stacks_there()


# ---------------------------------------------------------------- a pulumi that is missing or refuses


def test_no_pulumi_on_path_is_one_usage_line_and_a_json_error(project, capsys, monkeypatch, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, out, err = _run(capsys, "preview", "dev", "-o", "json")
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: no `pulumi` on PATH"), err
    doc = json.loads(out)
    assert doc["kind"] == "Error" and doc["exitCode"] == 2 and doc["command"] == "stacks"
    assert doc["message"].startswith("no `pulumi` on PATH")


def test_a_failing_stack_select_is_one_line_and_a_json_outcome(project, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_PULUMI_SELECT_ERROR", "failed to load checkpoint: blob (code=Unknown): AccessDenied")
    code, out, err = _run(capsys, "up", "dev", "-o", "json")
    assert code == 1 and "Traceback" not in err and "internal error" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "dev: up failed: error: failed to load checkpoint" in errors[0], err
    (outcome,) = json.loads(out)
    assert outcome["result"] == "failed" and "AccessDenied" in outcome["note"]


def test_a_failing_stack_init_is_one_line_and_a_json_outcome(project, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_PULUMI_INIT_ERROR", "could not create stack: permission denied")
    code, out, err = _run(capsys, "preview", "qa", "-o", "json")
    assert code == 1 and "Traceback" not in err and "internal error" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: qa: preview failed: error: could not create stack"), err
    (outcome,) = json.loads(out)
    assert (outcome["stack"], outcome["result"]) == ("qa", "failed") and "permission denied" in outcome["note"]
    assert "qa" not in _stacks_there()


def test_a_refused_preview_out_before_any_stack_is_the_json_error_object(project, capsys, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", project / "out")
    code, out, err = _run(capsys, "preview", "dev", "--preview-out", "out/preview.txt", "-o", "json")
    assert code == 1 and err.startswith("error: --preview-out out") and "symbolic link" in err, err
    doc = json.loads(out)
    assert doc["kind"] == "Error" and doc["exitCode"] == 1 and doc["command"] == "stacks"
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_refused_passphrase_is_one_line_that_names_the_variable(project, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_PULUMI_PASSPHRASE", "the-stack-s-real-passphrase")
    code, out, err = _run(capsys, "preview", "dev", "-c", "gpupool:skipAwait=true", "-o", "json")
    assert code == 1 and "Traceback" not in err and "internal error" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "PULUMI_CONFIG_PASSPHRASE" in errors[0] and "incorrect passphrase" in errors[0]
    (outcome,) = json.loads(out)
    assert outcome["stack"] == "dev" and outcome["result"] == "failed"
    assert "set the passphrase the stack was created with" in outcome["note"]


def test_the_credentials_pulumi_reads_are_registered_before_it_runs(project):
    secret_env.register_secrets(os.environ)
    for canary in CANARIES:
        assert canary in redact.registered()
    assert "gpupool" not in redact.registered()  # settings in the URL (the path) are not secrets


def test_the_passphrase_file_is_registered_and_a_fifo_there_does_not_hang(project, tmp_path, monkeypatch):
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    phrase = tmp_path / "passphrase"
    phrase.write_text("canary-file-passphrase-61b0\n")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(phrase))
    secret_env.register_secrets(os.environ)
    assert "canary-file-passphrase-61b0" in redact.registered()
    os.mkfifo(tmp_path / "fifo")  # nobody writes: opened without blocking, and not read
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "fifo"))
    secret_env.register_secrets(os.environ)


# ---------------------------------------------------------------- the torn-sidecar repair follows no link


def _victim(tmp_path: Path) -> Path:
    """A directory outside the backend holding what a torn sidecar looks like (non-JSON *.attrs beside
    their blobs): nothing here may be deleted."""
    victim = tmp_path / "victim"
    (victim / "stacks" / "p").mkdir(parents=True)
    for d in (victim, victim / "stacks" / "p"):
        (d / "notes.txt").write_text("keep")
        (d / "notes.txt.attrs").write_text("not json")
        (d / "empty.attrs").write_bytes(b"")
    return victim


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _repair(state: Path) -> tuple[list[Path], list[str]]:
    said: list[str] = []
    removed = recovery.repair_torn_sidecars(f"file://{state}", warn=said.append)
    return removed, said


def test_a_linked_pulumi_directory_is_not_followed(tmp_path):
    victim = _victim(tmp_path)
    before = _files(victim)
    state = tmp_path / "state"
    state.mkdir()
    (state / ".pulumi").symlink_to(victim)
    removed, said = _repair(state)
    assert removed == [] and _files(victim) == before
    assert len(said) == 1 and said[0].startswith("not repairing torn metadata sidecars: "), said
    assert f"{state / '.pulumi'}: gpupool follows no link in the state backend" in said[0]


def test_a_linked_directory_or_sidecar_below_pulumi_is_left_alone(tmp_path):
    victim = _victim(tmp_path)
    before = _files(victim)
    state = tmp_path / "state"
    stacks_dir = state / ".pulumi" / "stacks"
    stacks_dir.mkdir(parents=True)
    (stacks_dir / "p").symlink_to(victim / "stacks" / "p")  # a linked sub-directory
    (stacks_dir / "dev.json").write_text("{}")
    (stacks_dir / "dev.json.attrs").symlink_to(victim / "notes.txt.attrs")  # a linked sidecar
    (stacks_dir / "prod.json").write_text("{}")
    (stacks_dir / "prod.json.attrs").write_bytes(b"")  # a real torn sidecar: removed
    removed, said = _repair(state)
    assert removed == [stacks_dir / "prod.json.attrs"] and not (stacks_dir / "prod.json.attrs").exists()
    assert _files(victim) == before
    assert (stacks_dir / "p").is_symlink() and (stacks_dir / "dev.json.attrs").is_symlink()
    assert len(said) == 1 and said[0].startswith("left alone 2 symbolic link(s) in the state backend"), said


def test_a_link_in_the_backend_path_stops_the_repair(tmp_path):
    victim = tmp_path / "real-state"
    (victim / ".pulumi" / "stacks").mkdir(parents=True)
    (victim / ".pulumi" / "stacks" / "dev.json").write_text("{}")
    (victim / ".pulumi" / "stacks" / "dev.json.attrs").write_bytes(b"")
    link = tmp_path / "state"
    link.symlink_to(victim)
    removed, said = _repair(link)
    assert removed == [] and (victim / ".pulumi" / "stacks" / "dev.json.attrs").exists()
    assert len(said) == 1 and "gpupool follows no link in the state backend" in said[0], said


def test_only_a_proven_torn_sidecar_is_removed(tmp_path):
    """A sidecar whose blob is missing breaks nothing and stays; so do a valid one, a FIFO (opened without
    blocking: no hang), a directory named *.attrs and one too large to be a sidecar."""
    state = tmp_path / "state"
    d = state / ".pulumi" / "stacks" / "p"
    d.mkdir(parents=True)
    (d / "orphan.json.attrs").write_bytes(b"")
    (d / "ok.json").write_text("{}")
    (d / "ok.json.attrs").write_text('{"user.content_type": "application/json"}')
    (d / "list.json").write_text("{}")
    (d / "list.json.attrs").write_text("[]")  # JSON, but no object: fileblob's getAttrs cannot decode it
    (d / "fifo.json").write_text("{}")
    os.mkfifo(d / "fifo.json.attrs")
    (d / "dir.json").write_text("{}")
    (d / "dir.json.attrs").mkdir()
    (d / "big.json").write_text("{}")
    (d / "big.json.attrs").write_bytes(b"x" * (recovery.SIDECAR_LIMIT + 1))
    removed, said = _repair(state)
    assert removed == [d / "list.json.attrs"], removed
    assert said == []
    for name in ("orphan.json.attrs", "ok.json.attrs", "fifo.json.attrs", "dir.json.attrs", "big.json.attrs"):
        assert os.path.lexists(d / name), name


def test_the_runner_logs_the_refusal_and_goes_on(project, tmp_path):
    """Platform.run: the refusal is one log line; the stacks still run (pulumi itself reads the backend)."""
    victim = _victim(tmp_path)
    before = _files(victim)
    state = tmp_path / "state"
    state.mkdir()
    (state / ".pulumi").symlink_to(victim)
    logs: list[str] = []
    platform = stacks.Platform(_settings(project, logs=logs), "devv")
    with pytest.raises(stacks.StackError):
        platform.run("destroy")  # reaches the stacks: the mistyped one is refused there
    assert _files(victim) == before
    assert sum("not repairing torn metadata sidecars" in line for line in logs) == 1, logs
    assert logs[0].startswith("not repairing torn metadata sidecars: ")
