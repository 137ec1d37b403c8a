"""No credential leaves through any command's output (issue 34): one canary in every credential input of every
command that reads a kubeconfig, a URL or a credential file, and a failure provoked in each; the canary must be
in no stdout, stderr, JSON document or written file.

The stream scrubber that `cli.main` installs (gpupool.redact.install) is switched off here and every registered
secret forgotten, so this proves the first line of defence: the code never writes a credential at all. The
per-surface tests go deeper (tests/test_kubeconfig_hostile.py, tests/test_usage_hostile.py,
tests/test_stacks_hostile.py); this one is the index, and `test_every_credential_flag_is_in_the_table` fails
when a command gains a flag that can carry a credential without a row here.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpupool import redact
from gpupool.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]
CANARY = "CANARY" + secrets.token_hex(6)
DEAD = "127.0.0.1:1"  # nothing listens on port 1: every request fails fast with "connection refused"


@pytest.fixture(autouse=True)
def _first_line_only(monkeypatch):
    redact.forget_all()
    monkeypatch.setattr(redact, "install", lambda: None)
    yield
    redact.forget_all()


def _spec(tmp: Path) -> str:
    shutil.copytree(REPO / "stacks" / "dev", tmp / "dev")
    return str(tmp / "dev" / "spec.yaml")


def _kubeconfig(tmp: Path, user: dict) -> str:
    path = tmp / "kubeconfig"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": {"server": f"https://{DEAD}"}}],
        "users": [{"name": "u", "user": user}],
    }
    path.write_text(json.dumps(doc))  # JSON is YAML
    return str(path)


def _failing_plugin(tmp: Path) -> dict:
    """An exec credential plugin that echoes its environment (the canary) to stderr and fails."""
    script = tmp / "plugin.py"
    script.write_text(
        "import os, sys\nsys.stderr.write('login failed for ' + os.environ['SECRET'] + '\\n')\nsys.exit(1)\n"
    )
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(script)],
            "env": [{"name": "SECRET", "value": CANARY}],
            "interactiveMode": "Never",
        }
    }


def _key_pem() -> bytes:
    done = subprocess.run(["openssl", "genrsa", "2048"], capture_output=True, check=True)
    return done.stdout


def _file(tmp: Path, name: str, text: str) -> str:
    (tmp / name).write_text(text)
    return str(tmp / name)


def _git_stack(tmp: Path) -> str:
    spec = _spec(tmp)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}  # fmt: skip
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "base"]):
        subprocess.run(cmd, cwd=tmp, check=True, env=env, capture_output=True)
    return spec


# (id, flags covered, argv builder taking tmp_path, extra environment)
Case = tuple[str, set[str], Callable[[Path], list[str]], dict[str, str]]
TABLE: list[Case] = [
    ("render token", {"--kubeconfig"},
     lambda t: ["render", _spec(t), "--output-dir", str(t / "out"),
                "--kubeconfig", _kubeconfig(t, {"token": CANARY})], {}),
    ("render block-scalar token", {"--kubeconfig"},
     lambda t: ["render", _spec(t), "--output-dir", str(t / "out"),
                "--kubeconfig", _kubeconfig(t, {"token": CANARY + "\n"})], {}),
    ("render token file", {"--kubeconfig"},
     lambda t: ["render", _spec(t), "--output-dir", str(t / "out"),
                "--kubeconfig", _kubeconfig(t, {"tokenFile": _file(t, "tok", CANARY + "\n")})], {}),
    ("render basic auth", {"--kubeconfig"},
     lambda t: ["render", _spec(t), "--output-dir", str(t / "out"),
                "--kubeconfig", _kubeconfig(t, {"username": "me", "password": CANARY})], {}),
    ("render bad client key", {"--kubeconfig"},
     lambda t: ["render", _spec(t), "--output-dir", str(t / "out"), "--kubeconfig", _kubeconfig(t, {
         "client-certificate-data": base64.b64encode(b"not a certificate " + CANARY.encode()).decode(),
         "client-key-data": base64.b64encode(CANARY.encode()).decode()})], {}),
    ("render exec plugin", {"--kubeconfig", "--context"},
     lambda t: ["render", _spec(t), "--output-dir", str(t / "out"),
                "--kubeconfig", _kubeconfig(t, _failing_plugin(t)), "--context", "c"], {}),
    ("render yaml error on the token line", {"--kubeconfig"},
     lambda t: ["render", _spec(t), "--output-dir", str(t / "out"),
                "--kubeconfig", _file(t, "kc", f"users:\n- name: u\n  user:\n    token: {CANARY}: [\n")], {}),
    ("usage url password", {"--prometheus"},
     lambda t: ["usage", _spec(t), "--prometheus", f"http://me:{CANARY}@{DEAD}", "-o", "json"], {}),
    ("usage url password from env", set(),
     lambda t: ["usage", _spec(t), "-o", "json"], {"GPUPOOL_PROMETHEUS_URL": f"http://me:{CANARY}@{DEAD}"}),
    ("usage basic-auth file", {"--basic-auth-file"},
     lambda t: ["usage", _spec(t), "--prometheus", f"http://{DEAD}",
                "--basic-auth-file", _file(t, "ba", f"me:{CANARY}\n"), "-o", "json"], {}),
    ("usage basic-auth file with user", {"--basic-auth-file", "--basic-auth-user"},
     lambda t: ["usage", _spec(t), "--prometheus", f"http://{DEAD}", "--basic-auth-user", "me",
                "--basic-auth-file", _file(t, "ba", f"{CANARY}\n"), "-o", "json"], {}),
    ("usage bearer token file", {"--bearer-token-file"},
     lambda t: ["usage", _spec(t), "--prometheus", f"http://{DEAD}",
                "--bearer-token-file", _file(t, "bt", f"{CANARY}\n"), "-o", "json"], {}),
    ("usage multi-line token file", {"--bearer-token-file"},
     lambda t: ["usage", _spec(t), "--prometheus", f"http://{DEAD}",
                "--bearer-token-file", _file(t, "bt", f"{CANARY}\n{CANARY}x\n"), "-o", "json"], {}),
    ("usage ca file that is a key", {"--ca-file"},
     lambda t: ["usage", _spec(t), "--prometheus", f"https://{DEAD}",
                "--ca-file", _file(t, "ca", f"-----BEGIN CERTIFICATE-----\n{CANARY}\n-----END CERTIFICATE-----\n"),
                "-o", "json"], {}),
    ("diff artifact url", {"--artifact-url"},
     lambda t: ["diff", "--base", "HEAD", _git_stack(t), "-o", "markdown",
                "--artifact-url", f"https://me:{CANARY}@github.com/o/r/actions/runs/1"], {}),
    ("stacks without pulumi, secrets in the environment", set(),
     lambda t: ["stacks", "up", "dev", "-o", "json"],
     {"PULUMI_CONFIG_PASSPHRASE": CANARY, "PULUMI_ACCESS_TOKEN": CANARY, "AWS_SECRET_ACCESS_KEY": CANARY,
      "AWS_SESSION_TOKEN": CANARY, "PULUMI_BACKEND_URL": f"s3://me:{CANARY}@bucket?access_token={CANARY}",
      "PATH": "/nonexistent"}),
]  # fmt: skip


def _written(root: Path) -> str:
    out = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink() and ".git" not in p.parts:
            out.append(p.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(out)


@pytest.mark.parametrize("case", TABLE, ids=[c[0] for c in TABLE])
def test_no_canary_in_any_output(case, tmp_path, monkeypatch, capsys):
    name, _, argv, env = case
    if "key" in name and not shutil.which("openssl"):
        pytest.skip("openssl")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    args = argv(tmp_path)
    inputs = _written(tmp_path)  # what the test itself wrote (the canary is in there on purpose)
    code = cli_main.main(args)
    out, err = capsys.readouterr()
    assert CANARY not in out, out
    assert CANARY not in err, err
    written = _written(tmp_path)
    assert written.count(CANARY) == inputs.count(CANARY), "a file gpupool wrote holds the canary"
    if name.startswith(("render", "usage", "stacks")):
        assert code != 0, (code, err)  # each case provokes a failure
        assert err.strip(), "a failure says why"
        assert "Traceback" not in err and "internal error" not in err, err
    if "-o" in args and args[args.index("-o") + 1] == "json" and code != 0:
        doc = json.loads(out)  # a JSON document, not a leak-free empty stdout
        assert doc.get("kind") == "Error" or "stacks" in doc or "summary" in json.dumps(doc), doc


def _credential_flags() -> set[str]:
    """Every option of every command whose name says it can carry a credential or a place to send one."""
    words = ("kubeconfig", "context", "prometheus", "token", "password", "auth", "secret", "key", "url", "ca-file")
    found = set()
    parser = cli_main.build_parser()
    for command in cli_main._subcommands(parser):
        for action in command._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and any(w in flag for w in words):
                    found.add(flag)
    return found


def test_every_credential_flag_is_in_the_table():
    covered = set().union(*(c[1] for c in TABLE))
    assert _credential_flags() <= covered, sorted(_credential_flags() - covered)
