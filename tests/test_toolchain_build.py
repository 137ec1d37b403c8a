"""toolchain/build.sh tells the user what it is doing: progress with expected times, the lock, the log path,
each component's time; it builds independent components at the same time and keeps the declared order.

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
  "mod download") echo '{"Dir": "/nonexistent"}' ;;
  "mod edit") case "$*" in *-json*) echo '{}' ;; esac ;;
  "build "*)
    for a in "$@"; do case "$a" in *.tmp) out="$a" ;; esac; done
    [ -z "$FAKE_GO_TRACE" ] || echo "start $(basename "$out" .tmp) $(date +%s.%N)" >> "$FAKE_GO_TRACE"
    sleep "${FAKE_GO_SLEEP:-0}"
    [ -z "$FAKE_GO_TRACE" ] || echo "end $(basename "$out" .tmp) $(date +%s.%N)" >> "$FAKE_GO_TRACE"
    case " $FAKE_GO_FAIL " in *" $(basename "$out" .tmp) "*|" 1 ") echo "compile error: boom" >&2; exit 1 ;; esac
    printf '#!/bin/sh\n' > "$out"; chmod +x "$out" ;;
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
    """The cold time of NAME in toolchain/README.md's table (its row's first word is the name)."""
    row = next(
        line
        for line in (ROOT / "toolchain" / "README.md").read_text().splitlines()
        if line.startswith("| ") and line.split("|")[1].split()[:1] == [name]
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


def _trace(env, *names: str) -> tuple[subprocess.CompletedProcess, dict[str, tuple[float, float]]]:
    trace = Path(env["GPUPOOL_TOOLCHAIN_DIR"]).parent / "trace"
    env = {**env, "FAKE_GO_TRACE": str(trace), "FAKE_GO_SLEEP": "2", "POLL_SECS": "0.2"}
    p = subprocess.run(["bash", str(BUILD), *names], env=env, capture_output=True, text=True, timeout=60)
    spans: dict[str, list[float]] = {}
    for line in trace.read_text().splitlines() if trace.exists() else []:
        what, name, t = line.split()
        spans.setdefault(name, [0.0, 0.0])[what == "end"] = float(t)
    return p, {n: (a, b) for n, (a, b) in spans.items()}


def test_independent_components_build_at_the_same_time_and_each_one_s_time_is_printed(env):
    p, spans = _trace(env, "etcd", "gofakes3")
    assert p.returncode == 0, p.stderr
    (s1, e1), (s2, e2) = spans["etcd"], spans["gofakes3"]
    assert s1 < e2 and s2 < e1, f"the two builds did not overlap: {spans}"
    table = p.stderr[p.stderr.index("component times") :]
    assert re.search(r"etcd +[0-9]+s +built", table) and re.search(r"gofakes3 +[0-9]+s +built", table), table


def test_one_at_a_time_when_asked(env):
    env["GPUPOOL_TOOLCHAIN_JOBS"] = "1"
    p, spans = _trace(env, "etcd", "gofakes3")
    assert p.returncode == 0, p.stderr
    assert spans["gofakes3"][0] >= spans["etcd"][1], spans


def test_the_controller_manager_waits_for_the_apiserver_whose_packages_it_reuses(env):
    p, spans = _trace(env, "kube-apiserver", "kube-controller-manager")
    assert p.returncode == 0, p.stderr
    assert spans["kube-controller-manager"][0] >= spans["kube-apiserver"][1], spans


def test_a_component_whose_prerequisite_failed_is_skipped_and_the_others_still_build(env):
    env["FAKE_GO_FAIL"] = "kube-apiserver"
    p, spans = _trace(env, "kube-apiserver", "kube-controller-manager", "etcd")
    assert p.returncode == 1
    assert "skipping kube-controller-manager: it needs kube-apiserver, which failed" in p.stderr, p.stderr
    assert "kube-controller-manager" not in spans and "etcd" in spans
    assert os.access(Path(env["GPUPOOL_TOOLCHAIN_DIR"]) / "components" / "etcd-v3.6.8" / "etcd", os.X_OK)


def test_a_cached_run_builds_nothing_and_lists_every_component(env):
    p = subprocess.run(["bash", str(BUILD), "etcd"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    again = subprocess.run(["bash", str(BUILD), "etcd"], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "building" not in again.stderr, again.stderr
    names = subprocess.run(["bash", str(BUILD), "--list"], capture_output=True, text=True, timeout=60).stdout.split()
    assert {"etcd", "kube-apiserver", "pulumi", "gofakes3"} <= set(names)
    unknown = subprocess.run(["bash", str(BUILD), "nope"], env=env, capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 2 and "unknown component: nope" in unknown.stderr


def test_the_longest_build_starts_first(env):
    """The provider alone takes about as long as all the rest: started last, it would set the wall time."""
    env["GPUPOOL_TOOLCHAIN_JOBS"] = "1"
    p, spans = _trace(env, "etcd", "gofakes3", "kube-apiserver")
    assert p.returncode == 0, p.stderr
    order = sorted(spans, key=lambda n: spans[n][0])
    want = sorted(("etcd", "gofakes3", "kube-apiserver"), key=lambda n: -int(_expected(n)))
    assert order == want, (order, spans)


def test_check_passes_on_a_complete_cache_whose_data_files_are_not_executable(env):
    """`--check` (how ci/test.sh tells a warm run from a fresh one) accepted nothing while it required
    kueue-crds.yaml, a data file, to be executable: every warm run was judged as fresh."""
    for _ in range(40):  # fill the cache with what --check names, one missing file at a time
        p = subprocess.run(["bash", str(BUILD), "--check"], env=env, capture_output=True, text=True, timeout=60)
        if p.returncode == 0:
            break
        missing = Path(p.stderr.strip().removeprefix("missing: "))
        missing.parent.mkdir(parents=True, exist_ok=True)
        missing.write_text("#!/bin/sh\n")
        missing.chmod(0o644 if missing.suffix == ".yaml" else 0o755)
    assert p.returncode == 0, p.stderr
    bin_dir = Path(p.stdout.strip())
    assert (bin_dir / "kueue-crds.yaml").is_file() and not os.access(bin_dir / "kueue-crds.yaml", os.X_OK)
    (bin_dir / "etcd").chmod(0o644)  # a binary that cannot run is still missing
    p = subprocess.run(["bash", str(BUILD), "--check"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stderr.strip().endswith("/etcd"), p.stderr
