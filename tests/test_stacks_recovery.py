"""What a dead run leaves and `gpupool stacks` clears (gpupool/deploy/recovery.py): which lock holders are
dead, torn metadata sidecars of the file backend, and pending operations a rerun has completed. The real
engine exercises the same paths in tests/e2e/test_stacks_command.py."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpupool.deploy import recovery

# The text a diy backend's ConcurrentUpdateError carries (pulumi pkg/backend/diy/lock.go, checkLocked:
# "%v: created by %v@%v (pid %v) at %v").
LOCKED = (
    "error: the stack is currently locked by 2 lock(s). Either wait for the other process(es) to end or delete "
    "the lock file with `pulumi cancel`.\n"
    "  file:///srv/state/.pulumi/locks/organization/gpupool/dev/6b1c.json: created by runner@ci-7 (pid 4242) "
    "at 2026-12-03T07:00:01Z\n"
    "  file:///srv/state/.pulumi/locks/organization/gpupool/dev/9d2e.json: created by me@here (pid 17) "
    "at 2026-12-03T07:00:02.5+00:00\n"
)


def test_lock_holders_are_read_from_the_typed_error():
    a, b = recovery.lock_holders(LOCKED)
    assert (a.user, a.host, a.pid, a.timestamp) == ("runner", "ci-7", 4242, "2026-12-03T07:00:01Z")
    assert (b.user, b.host, b.pid) == ("me", "here", 17)
    assert recovery.lock_holders("error: something else") == []


def _now() -> str:
    return datetime.now(UTC).isoformat()


@pytest.fixture
def fake_pulumi(tmp_path):
    """A live process whose command name is `pulumi` (a copy of sleep), as a lock holder on this host."""
    binary = tmp_path / "pulumi"
    shutil.copy(shutil.which("sleep"), binary)
    taken = _now()
    time.sleep(0.05)
    proc = subprocess.Popen([str(binary), "30"])
    yield proc, taken
    proc.kill()
    proc.wait()


def test_a_live_pulumi_on_this_host_holds_its_lock(fake_pulumi):
    proc, _ = fake_pulumi
    time.sleep(0.2)
    holder = recovery.LockHolder("me", socket.gethostname(), proc.pid, _now())  # taken after it started
    assert not recovery.holder_is_dead(holder, single_writer=True)  # single-writer never overrides a live local one


def _now_minus(seconds: float) -> str:
    return datetime.fromtimestamp(time.time() - seconds, UTC).isoformat()


def test_a_gone_pid_a_reused_pid_and_a_foreign_holder(fake_pulumi):
    proc, taken = fake_pulumi
    host = socket.gethostname()
    not_pulumi = recovery.LockHolder("me", host, os.getpid(), taken)  # this test's python
    assert recovery.holder_is_dead(not_pulumi, False)
    proc.kill()
    proc.wait()
    assert recovery.holder_is_dead(recovery.LockHolder("me", host, proc.pid, taken), False)
    foreign = recovery.LockHolder("runner", "elsewhere.invalid", 1, taken)
    assert not recovery.holder_is_dead(foreign, single_writer=False)
    assert recovery.holder_is_dead(foreign, single_writer=True)


def test_a_killed_pulumi_not_yet_reaped_holds_nothing(fake_pulumi):
    """A SIGKILLed run's pulumi is a zombie until its new parent reaps it (some containers' init never does):
    its lock is a dead run's, although its pid still answers signal 0 and its comm is still `pulumi`."""
    proc, taken = fake_pulumi
    holder = recovery.LockHolder("me", socket.gethostname(), proc.pid, taken)
    assert not recovery.holder_is_dead(holder, False)
    proc.kill()
    deadline = time.monotonic() + 30
    while not recovery._exited(proc.pid):  # dead, not waited for: this test is its parent and has not reaped it
        assert time.monotonic() < deadline, "the killed process never became a zombie"
        time.sleep(0.01)
    os.kill(proc.pid, 0)  # the pid still answers
    assert recovery._command(proc.pid) == "pulumi"
    assert recovery.holder_is_dead(holder, False)
    proc.wait()


def test_a_pid_started_after_the_lock_was_taken_is_not_its_holder(fake_pulumi):
    proc, _ = fake_pulumi
    if recovery._started_at(proc.pid) is None:
        pytest.skip("no /proc")
    old_lock = recovery.LockHolder("me", socket.gethostname(), proc.pid, _now_minus(3600))
    assert recovery.holder_is_dead(old_lock, single_writer=False)


def test_torn_sidecars_are_removed_and_nothing_else(tmp_path):
    stacks = tmp_path / "state" / ".pulumi" / "stacks" / "gpupool"
    stacks.mkdir(parents=True)
    (stacks / "dev.json").write_text("{}")
    (stacks / "dev.json.attrs").write_text("")  # torn: truncated, never rewritten
    (stacks / "prod.json.attrs").write_text('{"user.content_type": "application/json"}')
    outside = tmp_path / "outside.attrs"
    outside.write_text("")
    (stacks / "link.json.attrs").symlink_to(outside)
    removed = recovery.repair_torn_sidecars(f"file://{tmp_path / 'state'}")
    assert removed == [stacks / "dev.json.attrs"]
    assert (stacks / "dev.json").exists() and (stacks / "prod.json.attrs").exists() and outside.exists()
    assert recovery.repair_torn_sidecars("s3://bucket/prefix") == []
    assert recovery.file_backend_dir("file://~/state?metadata=skip") == Path.home() / "state"


def test_pending_operations_the_rerun_completed_are_dropped():
    done = {"resource": {"urn": "urn:a"}, "type": "creating"}
    orphan = {"resource": {"urn": "urn:b"}, "type": "creating"}
    deployment = {"resources": [{"urn": "urn:a"}], "pending_operations": [done]}
    cleaned, unresolved = recovery.resolve_pending(deployment)
    assert cleaned is not None and cleaned["pending_operations"] == [] and unresolved == []
    cleaned, unresolved = recovery.resolve_pending({**deployment, "pending_operations": [done, orphan]})
    assert cleaned is None and unresolved == ["urn:b"]  # left for a person
    assert recovery.resolve_pending({"resources": []}) == (None, [])
    json.dumps(deployment)  # untouched input stays serialisable
