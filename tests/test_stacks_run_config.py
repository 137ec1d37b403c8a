"""`gpupool stacks` papercuts of issue 41 (items 5 and 7), against a fake pulumi CLI at the subprocess layer
(as tests/test_stacks_hostile.py: the Automation API's own code runs unchanged):

- `-c KEY=VALUE` is for this run only: pulumi gets a --config-file copy holding it, and the committed
  stacks/Pulumi.<stack>.yaml stays byte-identical; `--save-config` writes it (an empty value removes it);
- an invalid spec stops preview before pulumi runs, each diagnostic printed once, "1 error" not "1 errors";
- Ctrl-C (SIGINT to gpupool) prints one line, exits 130 and leaves no pulumi or plugin process behind;
- `gpupool stacks OP --help` says what OP does and what it needs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("pulumi")

from gpupool.cli.main import main  # noqa: E402
from gpupool.deploy import pulumi_process, run_config, secret_env  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

FAKE_PULUMI = """\
#!{python}
# A stand-in for the pulumi CLI: version, stack select/init/ls/tag ls, config (read from and written to the stack
# file, as pulumi does), preview and up. It records every call and, for --config-file, the file it was given.
import json, os, signal, subprocess, sys, time

import yaml

args = [a for a in sys.argv[1:] if a != "--non-interactive"]
state = os.environ["FAKE_PULUMI_DIR"]
with open(os.path.join(state, "calls.jsonl"), "a") as log:
    log.write(json.dumps(args) + "\\n")
stack_file = os.environ["FAKE_STACK_FILE"]

def settings():
    return (yaml.safe_load(open(stack_file)) if os.path.exists(stack_file) else None) or {{}}

def save(data):
    with open(stack_file, "w") as f:
        yaml.safe_dump(data, f)

if args == ["version"]:
    print("v3.274.1")
elif args[:2] in (["stack", "select"], ["stack", "init"]):
    pass
elif args[:2] == ["stack", "export"]:
    print(json.dumps({{"version": 3, "deployment": {{}}}}))
elif args[:3] == ["stack", "ls", "--json"]:
    print(json.dumps([{{"name": "dev", "current": True}}]))
elif args[:3] == ["stack", "tag", "ls"]:  # the inputs record (gpupool.deploy.unchanged): none yet
    print("{{}}")
elif args[:2] == ["config", "set-all"]:
    data = settings()
    pairs = [args[i + 1] for i, a in enumerate(args) if a in ("--plaintext", "--secret")]
    data.setdefault("config", {{}}).update(dict(p.split("=", 1) for p in pairs))
    save(data)
elif args[:2] == ["config", "rm-all"]:
    data = settings()
    for key in args[4:]:
        data.get("config", {{}}).pop(key, None)
    save(data)
elif args[:1] == ["config"]:
    config = settings().get("config") or {{}}
    print(json.dumps({{k: {{"value": v, "secret": False}} for k, v in config.items()}}))
elif args[:1] in (["preview"], ["up"], ["refresh"]):  # refresh: the read before an up
    if "--config-file" in args:
        given = open(args[args.index("--config-file") + 1]).read()
        open(os.path.join(state, "config-file.yaml"), "w").write(given)
    if os.environ.get("FAKE_PULUMI_HANG"):
        # a plugin in a process group of its own, as pulumi starts them (cmdutil.RegisterProcessGroup)
        plugin = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        def cancel(signum, frame):  # pulumi's graceful cancel: stop the plugins, then exit
            plugin.terminate()
            plugin.wait()
            sys.exit(255)
        signal.signal(signal.SIGINT, cancel)
        with open(os.path.join(state, "pids.tmp"), "w") as f:
            json.dump({{"pulumi": os.getpid(), "plugin": plugin.pid}}, f)
        os.rename(os.path.join(state, "pids.tmp"), os.path.join(state, "pids.json"))
        for _ in range(1200):
            time.sleep(0.1)
    sys.stderr.write("error: fake pulumi stops here\\n")
    sys.exit(255)
else:
    sys.stderr.write("error: fake pulumi cannot " + " ".join(args[:2]) + "\\n")
    sys.exit(255)
"""

STACK_FILE = (
    "# the team's committed settings\nconfig:\n  gpupool:spec: stacks/dev/spec.yaml\n  gpupool:skipAwait: 'false'\n"
)


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A scaffold-shaped project (stackConfigDir: stacks, project name not gpupool) as the current directory,
    its virtualenv, the dev stack's spec and a fake pulumi first on PATH."""
    d = tmp_path / "project"
    (d / "venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, d / "venv" / "bin" / "python")
    (d / "Pulumi.yaml").write_text(
        "name: gpu-team\nruntime:\n  name: python\n  options:\n    virtualenv: venv\nstackConfigDir: stacks\n"
    )
    (d / "stacks").mkdir()
    shutil.copytree(REPO / "stacks" / "dev", d / "stacks" / "dev")
    (d / "stacks" / "Pulumi.dev.yaml").write_text(STACK_FILE)
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "pulumi").write_text(FAKE_PULUMI.format(python=sys.executable))
    (fake / "pulumi").chmod(0o755)
    state = tmp_path / "fake-pulumi"
    state.mkdir()
    monkeypatch.setenv("FAKE_PULUMI_DIR", str(state))
    monkeypatch.setenv("FAKE_STACK_FILE", str(d / "stacks" / "Pulumi.dev.yaml"))
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path / 'state'}")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "test")
    monkeypatch.delenv("FAKE_PULUMI_HANG", raising=False)
    monkeypatch.chdir(d)
    return d


def _calls() -> list[list[str]]:
    log = Path(os.environ["FAKE_PULUMI_DIR"]) / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _given_config_file() -> dict | None:
    path = Path(os.environ["FAKE_PULUMI_DIR"]) / "config-file.yaml"
    return yaml.safe_load(path.read_text()) if path.exists() else None


# -- item 5: per-run settings stay out of the committed stack file ---------------------------------------


def test_per_run_config_leaves_the_stack_file_byte_identical(project, capsys):
    chart = str(project / "charts" / "gpu-operator")  # an absolute, machine-specific path
    before = (project / "stacks" / "Pulumi.dev.yaml").read_bytes()
    status = main(["stacks", "preview", "dev", "-c", f"gpupool:operatorChartPath={chart}", "-c", "skipAwait="])
    assert status == 1  # the fake's preview fails after reading its config
    assert (project / "stacks" / "Pulumi.dev.yaml").read_bytes() == before
    assert not any(c[:2] in (["config", "set-all"], ["config", "set"]) for c in _calls())
    # pulumi got the run's values in a copy of the stack file, beside the committed ones
    given = _given_config_file()
    assert given is not None
    assert given["config"]["gpupool:operatorChartPath"] == chart
    assert given["config"]["gpupool:spec"] == "stacks/dev/spec.yaml"
    assert given["config"]["gpu-team:skipAwait"] == ""  # a bare key is in the project's namespace
    assert given["config"]["gpupool:skipAwait"] == "false"
    (preview,) = [c for c in _calls() if c[:1] == ["preview"]]
    copy = preview[preview.index("--config-file") + 1]
    assert not Path(copy).exists() and not Path(copy).parent.exists()  # removed after the run
    assert not Path(copy).is_relative_to(project)


def test_save_config_writes_the_value_and_an_empty_value_removes_it(project, capsys):
    chart = "charts/gpu-operator"
    status = main(
        [
            "stacks",
            "preview",
            "dev",
            "--save-config",
            "-c",
            f"gpupool:operatorChartPath={chart}",
            "-c",
            "gpupool:skipAwait=",
        ]
    )
    assert status == 1
    config = yaml.safe_load((project / "stacks" / "Pulumi.dev.yaml").read_text())["config"]
    assert config["gpupool:operatorChartPath"] == chart
    assert "gpupool:skipAwait" not in config  # not saved as an empty value
    (preview,) = [c for c in _calls() if c[:1] == ["preview"]]
    assert "--config-file" not in preview  # pulumi reads the stack file it was just given


def test_without_c_pulumi_reads_its_own_stack_file(project, capsys):
    main(["stacks", "preview", "dev"])
    (preview,) = [c for c in _calls() if c[:1] == ["preview"]]
    assert "--config-file" not in preview


def test_overlay_keeps_the_secrets_provider_and_encrypted_values(tmp_path):
    text = "encryptionsalt: v1:abc\nconfig:\n  gpupool:spec: s.yaml\n  gpupool:token:\n    secure: v1:xyz\n"
    data = run_config.merged(text, {"gpupool:context": "kind-dev"}, "p")
    assert data["encryptionsalt"] == "v1:abc"
    assert data["config"]["gpupool:token"] == {"secure": "v1:xyz"}
    assert data["config"]["gpupool:context"] == "kind-dev"
    with pytest.raises(ValueError):
        run_config.merged("- a list\n", {"k:v": "x"}, "p")


def test_stack_file_follows_stack_config_dir(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text("name: p\nstackConfigDir: stacks\n")
    assert run_config.stack_file(tmp_path, "org/p/dev") == tmp_path / "stacks" / "Pulumi.dev.yaml"
    (tmp_path / "Pulumi.yaml").write_text("name: p\n")
    (tmp_path / "Pulumi.dev.yml").write_text("config: {}\n")
    assert run_config.stack_file(tmp_path, "dev") == tmp_path / "Pulumi.dev.yml"


# -- item 7: an invalid spec, once --------------------------------------------------------------------


def test_invalid_spec_preview_prints_each_diagnostic_once_and_pluralises(project, capsys):
    spec = project / "stacks" / "dev" / "spec.yaml"
    text = spec.read_text()
    spec.write_text(text.replace("apiVersion: gpupool.dev/v1alpha1", "apiVersion: gpupool.dev/v0", 1))
    assert text != spec.read_text()
    assert main(["stacks", "preview", "dev"]) == 1
    out, err = capsys.readouterr()
    diagnostics = [ln for ln in err.splitlines() if ": error: " in ln and ln.startswith("stacks/dev/")]
    assert len(diagnostics) == 1
    assert err.count(diagnostics[0]) == 1
    assert "1 error in the spec" in err and "1 errors" not in err + out
    assert not any(c[:1] == ["preview"] for c in _calls())  # pulumi never ran the program


def test_the_program_pluralises_its_error_count(tmp_path):
    pulumi = pytest.importorskip("pulumi")
    from components import platform

    shutil.copytree(REPO / "stacks" / "dev", tmp_path / "dev")
    spec = tmp_path / "dev" / "spec.yaml"
    spec.write_text(spec.read_text().replace("apiVersion: gpupool.dev/v1alpha1", "apiVersion: gpupool.dev/v0", 1))
    with pytest.raises(pulumi.RunError) as info:
        platform.load_or_stop(spec)
    assert "1 error in the spec" in str(info.value) and "errors" not in str(info.value)


# -- item 7: help that says what each action does and needs -------------------------------------------


@pytest.mark.parametrize("op", ["preview", "up", "destroy"])
def test_action_help_says_what_it_does_and_needs(op, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["stacks", op, "--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"gpupool stacks {op} STACK:" in out
    for need in ("pulumi CLI", "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "pulumi login"):
        assert need in out
    others = [o for o in ("preview", "up", "destroy") if o != op]
    assert not any(f"gpupool stacks {o} STACK:" in out for o in others)


# -- item 7: Ctrl-C --------------------------------------------------------------------------------------


def _gone(pid: int, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not pulumi_process._alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_ctrl_c_during_up_is_one_line_exit_130_and_no_process_left(project, tmp_path):
    env = {**os.environ, "FAKE_PULUMI_HANG": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpupool", "stacks", "up", "dev"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # no terminal: the SIGINT below reaches gpupool alone, which forwards it
    )
    pids_file = Path(os.environ["FAKE_PULUMI_DIR"]) / "pids.json"
    try:
        for _ in range(1200):  # bounded: until the fake is up and running its plugin
            if pids_file.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert pids_file.exists(), proc.communicate(timeout=30)
        pids = json.loads(pids_file.read_text())
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("[gpupool stacks]")]
    assert lines == ["interrupted; the stack's lock and state: see docs/howto/recover-failed-run.md"]
    assert "Traceback" not in err
    assert _gone(pids["pulumi"]) and _gone(pids["plugin"])


STUBBORN = """\
import json, os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a pulumi that does not cancel
plugin = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
print(json.dumps({"plugin": plugin.pid}), flush=True)
for _ in range(1200):
    time.sleep(0.1)
"""


def test_stop_escalates_to_sigterm_and_reaches_plugins_in_their_own_group():
    proc = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        plugin = json.loads(proc.stdout.readline())["plugin"]
        pulumi_process.stop(proc, interrupt_grace=0.5, term_grace=5.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode is not None and proc.returncode < 0  # ended by a signal, not by itself
    assert _gone(plugin)


def test_a_second_interrupt_skips_the_grace():
    """Ctrl-C again while stop() waits for pulumi's cancel: SIGTERM at once (the grace here would otherwise
    be 600 s), not a KeyboardInterrupt that leaves the processes running."""
    import threading

    proc = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True, start_new_session=True)
    default = signal.getsignal(signal.SIGINT)

    def press_again():
        for _ in range(2000):  # bounded: until stop() has its own SIGINT handler in place
            if signal.getsignal(signal.SIGINT) is not default:
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.01)

    try:
        plugin = json.loads(proc.stdout.readline())["plugin"]
        presser = threading.Thread(target=press_again, daemon=True)
        presser.start()
        pulumi_process.stop(proc, interrupt_grace=600.0, term_grace=5.0)
        presser.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGTERM
    assert _gone(plugin)
    assert signal.getsignal(signal.SIGINT) is default  # restored


COUNTING = """\
import signal, sys, time
def count(signum, frame):
    sys.stdout.write("SIGINT\\n")
    sys.stdout.flush()
signal.signal(signal.SIGINT, count)
print("ready", flush=True)
for _ in range(1200):
    time.sleep(0.1)
"""


def test_after_a_terminal_ctrl_c_pulumi_gets_no_second_sigint(monkeypatch):
    """A terminal's Ctrl-C reached pulumi with gpupool (one foreground group): a second SIGINT would make
    pulumi terminate at once instead of cancelling, so stop() only waits, then sends SIGTERM."""
    monkeypatch.setattr(pulumi_process, "_terminal_interrupted_group", lambda: True)
    proc = subprocess.Popen([sys.executable, "-c", COUNTING], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        pulumi_process.stop(proc, interrupt_grace=0.5, term_grace=5.0)
        rest = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGTERM
    assert "SIGINT" not in rest


def test_credential_c_values_are_registered_for_scrubbing():
    from gpupool import redact

    redact.forget_all()
    try:
        kubeconfig = "apiVersion: v1\nusers:\n- name: u\n  user: {token: canary-kube-token-51}\n"
        secret_env.register_config_secrets(
            {
                "gpupool:kubeconfig": kubeconfig,
                "gpupool:apiToken": "canary-token-77",
                "gpupool:context": "kind-dev",
                "gpupool:operatorChartPath": "/charts/op",
            }
        )
        text = redact.scrub(f"pulumi said: {kubeconfig} and canary-token-77; context kind-dev, chart /charts/op")
        assert "canary-kube-token-51" not in text and "canary-token-77" not in text
        assert "kind-dev" in text and "/charts/op" in text  # settings, not credentials: still shown
    finally:
        redact.forget_all()
