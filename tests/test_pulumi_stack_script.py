"""ci/pulumi-stack.sh's dead-run recovery, against a fake `pulumi` on PATH (no toolchain needed).

The decisions under test: a lock is cancelled only when every holder is gone (dead pid on this host, or a
pid now used by another program; a foreign host only under GPUPOOL_SINGLE_WRITER=1), a live holder's lock is
never touched, and a torn `.attrs` sidecar of the file backend is removed while a valid one stays.
The real engine runs the same script in tests/e2e/test_cli_path.py and test_crash_safety.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.fake_pulumi import fake_project

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "ci" / "pulumi-stack.sh"

FAKE_PULUMI = """#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
case "$1" in
  up|destroy)
    if [ -e "$FAKE_LOCK" ]; then cat "$FAKE_LOCK" >&2; exit 255; fi
    echo "Resources: 3 unchanged" ;;
  cancel) rm -f "$FAKE_LOCK" ;;
esac
exit 0
"""


@pytest.fixture
def env(tmp_path):
    if not shutil.which("bash"):
        pytest.skip("bash not available")
    bin_dir, project = fake_project(tmp_path, FAKE_PULUMI)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GPUPOOL_PROJECT_DIR": str(project),
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}?metadata=skip",
        "FAKE_LOG": str(tmp_path / "calls.log"),
        "FAKE_LOCK": str(tmp_path / "lock.txt"),
    }


FILE_LOCK_URL = "file:///state/.pulumi/locks/organization/p/dev/0b1c.json"
# As pulumi v3.274.1 prints it for an s3:// backend (diy lockURLForError: the backend URL, query included,
# with the lock's key as path), captured against tests/e2e/s3.py's server.
S3_LOCK_URL = (
    "s3://gpupool-state/gpupool/.pulumi/locks/organization/p/dev/c7c36c1c-f8d6-4851-aacf-a8b634e3f1f5.json"
    "?endpoint=http%3A%2F%2F127.0.0.1%3A34895&region=us-east-1&request_checksum_calculation=when_required"
    "&s3ForcePathStyle=true"
)


def _lock(env, host: str, pid: int, when: datetime | None = None, url: str = FILE_LOCK_URL) -> None:
    ts = (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    Path(env["FAKE_LOCK"]).write_text(
        "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or "
        "delete the lock file with `pulumi cancel`.\n"
        f"  {url}: created by ci@{host} (pid {pid}) at {ts}\n"
    )


def _run(env, op="up", **extra) -> tuple[subprocess.CompletedProcess, list[str]]:
    p = subprocess.run(
        ["bash", str(SCRIPT), "dev", op],
        env={**env, **extra},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
    )
    log = Path(env["FAKE_LOG"])
    calls = log.read_text().splitlines() if log.exists() else []
    return p, [c.split()[0] for c in calls]


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_no_lock_runs_up_then_the_convergence_preview(env):
    p, calls = _run(env)
    assert p.returncode == 0, p.stdout
    assert calls == ["login", "stack", "config", "up", "stack", "preview"], calls


def test_the_venv_from_pulumi_yaml_comes_first_on_path(env, tmp_path):
    fake = Path(env["PATH"].split(":")[0]) / "pulumi"
    fake.write_text(FAKE_PULUMI.replace('echo "$*"', 'echo "$(command -v python)"'))
    p, _ = _run(env, "preview")
    assert p.returncode == 0, p.stdout
    assert Path(env["FAKE_LOG"]).read_text().split()[0] == str(tmp_path / "project" / "venv" / "bin" / "python")


def test_a_dead_holder_s_lock_on_this_host_is_cancelled_and_up_retried(env):
    _lock(env, socket.gethostname(), _dead_pid())
    p, calls = _run(env)
    assert p.returncode == 0, p.stdout
    assert calls == ["login", "stack", "config", "up", "cancel", "up", "stack", "preview"], calls
    assert "holder gone" in p.stdout


def test_a_pid_reused_by_another_program_counts_as_dead(env):
    _lock(env, socket.gethostname(), os.getpid())  # alive, but python, not pulumi
    p, calls = _run(env)
    assert p.returncode == 0, p.stdout
    assert "cancel" in calls


def test_a_live_pulumi_holder_s_lock_is_never_touched(env, tmp_path):
    live = tmp_path / "live" / "pulumi"  # a process whose name is `pulumi`
    live.parent.mkdir()
    shutil.copy(shutil.which("sleep"), live)
    holder = subprocess.Popen([str(live), "30"])
    try:
        time.sleep(1.2)
        _lock(env, socket.gethostname(), holder.pid)
        p, calls = _run(env)
    finally:
        holder.kill()
        holder.wait()
    assert p.returncode != 0
    assert "cancel" not in calls and calls.count("up") == 1, calls
    assert "live lock" in p.stdout and "currently locked" in p.stdout


def test_a_foreign_host_s_lock_is_cancelled_only_for_a_single_writer(env):
    _lock(env, "runner-that-is-gone", 4242)
    p, calls = _run(env)
    assert p.returncode != 0 and "cancel" not in calls, (p.stdout, calls)
    Path(env["FAKE_LOG"]).unlink()
    p, calls = _run(env, GPUPOOL_SINGLE_WRITER="1")
    assert p.returncode == 0, p.stdout
    assert calls == ["login", "stack", "config", "up", "cancel", "up", "stack", "preview"], calls


def test_the_s3_backend_s_lock_lines_are_read_the_same(env):
    """The holder line of an s3:// backend names a URL with a query string; the holder is still found."""
    env["PULUMI_BACKEND_URL"] = "s3://gpupool-state/gpupool?endpoint=http://127.0.0.1:34895&s3ForcePathStyle=true"
    _lock(env, socket.gethostname(), _dead_pid(), url=S3_LOCK_URL)
    p, calls = _run(env)
    assert p.returncode == 0, p.stdout
    assert calls == ["login", "stack", "config", "up", "cancel", "up", "stack", "preview"], calls
    assert f"created by ci@{socket.gethostname()} (pid" in p.stdout and "holder gone" in p.stdout
    Path(env["FAKE_LOG"]).unlink()
    _lock(env, "runner-that-is-gone", 4242, url=S3_LOCK_URL)
    p, calls = _run(env)
    assert p.returncode != 0 and "cancel" not in calls, (p.stdout, calls)
    assert "live lock: created by ci@runner-that-is-gone (pid 4242)" in p.stdout
    Path(env["FAKE_LOG"]).unlink()
    p, calls = _run(env, GPUPOOL_SINGLE_WRITER="1")
    assert p.returncode == 0 and calls.count("cancel") == 1, (p.stdout, calls)


def test_a_torn_metadata_sidecar_is_removed_and_a_valid_one_kept(env, tmp_path):
    stacks = tmp_path / "state" / ".pulumi" / "stacks" / "p"
    stacks.mkdir(parents=True)
    torn, ok = stacks / "dev.json.attrs", stacks / "prod.json.attrs"
    torn.write_bytes(b"")
    ok.write_text('{"user.cache_control":"","user.content_type":"application/octet-stream"}\n')
    p, _ = _run(env)
    assert p.returncode == 0, p.stdout
    assert not torn.exists() and ok.exists()
    assert "removing torn metadata sidecar" in p.stdout


def test_a_failure_that_is_not_a_lock_is_not_retried(env):
    fake = Path(env["PATH"].split(":")[0]) / "pulumi"
    fake.write_text(
        FAKE_PULUMI.replace('echo "Resources: 3 unchanged" ;;', 'echo "error: update failed" >&2; exit 1 ;;')
    )
    p, calls = _run(env)
    assert p.returncode == 1
    assert calls == ["login", "stack", "config", "up"], calls
