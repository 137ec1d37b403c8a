"""CLI conventions shared by every command (docs/reference/cli.md, "CLI conventions")."""

from __future__ import annotations

import argparse

import pytest

from gpupool.cli.common import add_output_format


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t")
    add_output_format(p, ("text", "json"), "text")
    return p


@pytest.mark.parametrize(
    "argv,expected",
    [
        ([], "text"),
        (["-o", "json"], "json"),
        (["--output", "json"], "json"),
        (["--output=json"], "json"),
        (["-ojson"], "json"),
        (["--format", "json"], "json"),
        (["--format=json"], "json"),
    ],
)
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


@pytest.mark.parametrize(
    "setup,stack,message",
    [
        (lambda p: None, "qa", "no stacks/Pulumi.qa.yaml; stacks: dev, prod"),
        (
            lambda p: (p / "stacks/Pulumi.dev.yaml").write_text("config:\n  gpupool:kubeconfig: x\n"),
            "dev",
            "no gpupool:spec setting",
        ),
        (lambda p: (p / "Pulumi.yaml").unlink(), "dev", "no Pulumi.yaml"),
        (lambda p: None, "../etc", "give a stack name"),
    ],
)
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


# --- encoding, colour, completion, help, plurals ---------------------------------------------------------

import argparse as _argparse  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402


def _gpupool(*argv, env=None, **kw):
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "PYTHONIOENCODING", "PYTHONUTF8")}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "gpupool", *argv], capture_output=True, cwd=REPO, env=full, timeout=120, **kw
    )


@pytest.mark.parametrize(
    "env",
    [
        {"PYTHONIOENCODING": "ascii"},
        {"PYTHONIOENCODING": "latin-1"},
        {"LANG": "C", "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"},
    ],
)
def test_ascii_fallback_when_stdout_cannot_encode(env):
    r = _gpupool("mig", "suggest", "--stack", "dev", "--pool", "a100-mig", env=env)
    assert r.returncode == 0, r.stderr
    encoding = env.get("PYTHONIOENCODING", "ascii")
    out = r.stdout.decode(encoding)
    assert "UnicodeEncodeError" not in r.stderr.decode(encoding)
    assert " -> 6" in out and "\n! adopting the suggestion" in out  # → becomes ->, ⚠ becomes !
    assert "→" not in out and "⚠" not in out
    if encoding != "latin-1":  # Latin-1 has ×: it stays
        assert "(1x4 A100-80GB)" in out and "×" not in out


def test_unicode_kept_where_stdout_can_encode():
    r = _gpupool("mig", "suggest", "--stack", "dev", "--pool", "a100-mig", env={"PYTHONIOENCODING": "utf-8"})
    out = r.stdout.decode("utf-8")
    assert "→" in out and "⚠ adopting" in out


def test_no_colour_in_pipes_and_with_never():
    for argv in ([], ["--color", "never"]):
        r = _gpupool(*argv, "validate", "tests/bad_specs/tenant-unknown-tier.yaml")
        assert r.returncode == 1 and b"\x1b[" not in r.stderr and b"error" in r.stderr


def test_colour_always_marks_only_the_severity():
    r = _gpupool("--color", "always", "validate", "tests/bad_specs/tenant-unknown-tier.yaml")
    lines = [x for x in r.stderr.decode().splitlines() if ": \x1b[31merror\x1b[0m: " in x]
    assert lines and all(x.count("\x1b[") == 2 for x in lines)
    assert b"\x1b[" not in r.stdout


def _on_a_terminal(env):
    """Run validate with stderr on a pseudo-terminal; returns what the terminal showed."""
    import pty

    master, slave = pty.openpty()
    full = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full.update(env, TERM="xterm")
    p = subprocess.Popen(
        [sys.executable, "-m", "gpupool", "validate", "tests/bad_specs/tenant-unknown-tier.yaml"],
        cwd=REPO,
        env=full,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=60)
    os.close(master)
    return b"".join(chunks)


def test_colour_on_a_terminal_unless_no_color():
    assert b"\x1b[31merror\x1b[0m" in _on_a_terminal({})
    shown = _on_a_terminal({"NO_COLOR": "1"})
    assert b"error" in shown and b"\x1b[" not in shown


@pytest.mark.parametrize("shell,marker", [("bash", "complete"), ("zsh", "#compdef gpupool")])
def test_completion_scripts_name_every_command(shell, marker, capsys):
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert marker in script
    for word in ("validate", "plan", "diff", "render", "suggest", "models", "tenant", "--stack", "--output"):
        assert word in script, word


def _subparsers(parser, path=()):
    for action in parser._actions:
        if isinstance(action, _argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield path + (name,), sub, helps.get(name)
                yield from _subparsers(sub, path + (name,))


def test_help_text_for_every_command_and_argument(capsys):
    from gpupool.cli.main import build_parser

    seen = []
    for path, sub, summary in _subparsers(build_parser()):
        if path == ("render",) and not _render_migrated():
            continue
        seen.append(" ".join(path))
        assert summary, f"`gpupool {' '.join(path)}` has no one-line help in its parent's list"
        for action in sub._actions:
            if isinstance(action, (_argparse._HelpAction, _argparse._SubParsersAction)):
                continue
            assert action.help, f"`gpupool {' '.join(path)}` argument {action.dest} has no help"
        with pytest.raises(SystemExit) as exc:
            main([*path, "--help"])
        assert exc.value.code == 0
    assert {"mig models", "mig suggest", "tenant new", "completion"} <= set(seen)


def _render_migrated() -> bool:
    """render's own conventions (--output-dir, SPEC via cli.common) land with issue 10's render work."""
    from gpupool.cli.main import build_parser

    text = build_parser()._subparsers._group_actions[0].choices["render"].format_help()
    return "--output-dir" in text


def test_plural_helper():
    from gpupool.present.text import plural

    assert [plural(n, "error") for n in (0, 1, 2)] == ["0 errors", "1 error", "2 errors"]
    assert plural(1, "node") == "1 node" and plural(3, "policy") == "3 policies" and plural(2, "pass") == "2 passes"


def test_validate_summary_says_1_error_and_1_warning(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text((REPO / "tests/bad_specs/tenant-unknown-tier.yaml").read_text())
    assert main(["validate", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "1 error," in err and "1 errors" not in err and "1 warnings" not in err
