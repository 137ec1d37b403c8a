"""toolchain/build.sh tells the user what it is doing: progress with expected times, the lock, the log path.

A fake `go` on PATH stands in for the compiler (it sleeps, then writes the binary, or fails), so these run
in seconds and never touch the real cache.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "toolchain" / "build.sh"

FAKE_GO = r"""#!/bin/sh
case "$1 $2" in
  "env GOVERSION") echo go1.26.8 ;;
  "build "*)
    sleep "${FAKE_GO_SLEEP:-0}"
    if [ -n "$FAKE_GO_FAIL" ]; then echo "compile error: boom" >&2; exit 1; fi
    while [ $# -gt 0 ]; do
      if [ "$1" = -o ]; then printf '#!/bin/sh\n' > "$2"; chmod +x "$2"; fi
      shift
    done ;;
  *) echo "go $*" ;;
esac
"""

pytestmark = pytest.mark.skipif(not shutil.which("flock"), reason="build.sh locks with flock")


@pytest.fixture
def env(tmp_path):
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "go").write_text(FAKE_GO)
    (fake / "go").chmod(0o755)
    cache = tmp_path / "cache"
    return {
        **os.environ,
        "PATH": f"{fake}:{os.environ['PATH']}",
        "GPUPOOL_TOOLCHAIN_DIR": str(cache),
        "PROGRESS_SECS": "1",
    }


def _expected(name: str) -> str:
    row = next(
        line for line in (ROOT / "toolchain" / "README.md").read_text().splitlines() if line.startswith(f"| {name} |")
    )
    return re.search(r"[0-9]+", row.split("|")[2]).group(0)


def test_a_line_per_component_with_elapsed_and_expected_time(env):
    env["FAKE_GO_SLEEP"] = "3"
    p = subprocess.run(["bash", str(BUILD), "etcd"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    exp = _expected("etcd")
    log = Path(env["GPUPOOL_TOOLCHAIN_DIR"]) / "logs" / "etcd-v3.6.8.log"
    assert f"[1/1] building etcd v3.6.8 (expected ~{exp}s on 2 cores); log: {log}" in p.stderr
    assert re.search(rf"etcd: [0-9]+s elapsed of ~{exp}s expected", p.stderr), p.stderr
    assert re.search(rf"\[1/1\] built etcd in [0-9]+s \(expected ~{exp}s\)", p.stderr), p.stderr
    assert p.stdout.strip().splitlines()[-1].endswith("/bin")


def test_a_failed_build_names_its_log(env):
    env["FAKE_GO_FAIL"] = "1"
    p = subprocess.run(["bash", str(BUILD), "etcd"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    log = Path(env["GPUPOOL_TOOLCHAIN_DIR"]) / "logs" / "etcd-v3.6.8.log"
    assert "compile error: boom" in log.read_text()
    assert "FAILED to build etcd v3.6.8" in p.stderr and "compile error: boom" in p.stderr
    assert p.stderr.rstrip().endswith(f"full logs: {log}")


def test_waiting_for_the_lock_is_said(env):
    cache = Path(env["GPUPOOL_TOOLCHAIN_DIR"])
    cache.mkdir()
    (cache / ".build.owner").write_text("pid 4242 on ci, since 2026-01-01T00:00:00Z\n")
    holder = subprocess.Popen(["flock", str(cache / ".build.lock"), "sleep", "3"])
    try:
        time.sleep(0.5)
        p = subprocess.run(["bash", str(BUILD), "etcd"], env=env, capture_output=True, text=True, timeout=60)
    finally:
        holder.wait()
    assert p.returncode == 0, p.stderr
    assert "another toolchain build holds" in p.stderr and "pid 4242" in p.stderr
    assert re.search(r"got the lock after [0-9]+s", p.stderr)
    assert not (cache / ".build.owner").exists()  # removed when the build that wrote it ends
