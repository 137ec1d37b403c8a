"""How large an input each command handles within a memory and time budget (default 4 GB, 60 s), at the
input caps (issue 21: every input read is bounded).

Run: PYTHONPATH=. python bench/bench_input_limits.py [--mib 1 4] [--commands validate plan ...]
                                                    [--memory-gb 4] [--seconds 60] [--markdown]

For each size, the dev stack gets that many MiB of extra tenant files (copies of one tenant with a zero
quota, so the stack stays valid and every command does its full work), and each command runs in a child
process under `ulimit -v` (RLIMIT_AS) of the memory budget, measured with getrusage (peak RSS, CPU seconds)
and the wall clock. The caps are lifted (`--max-input-size 4Gi --max-file-size 4Gi`) so that sizes at and
above the default run cap are measured, not refused. Commands:

  validate, plan, render (into a new directory), shards, mig-suggest (`mig suggest --pool a100-mig SPEC`),
  tenant-new (validates the stack without and with the new tenant, then writes one file),
  diff (the dev spec as BASE, the large stack as HEAD),
  diff-base (`diff --base HEAD SPEC` in a git repository holding the large stack: both sides are large).

Printed per command and size: exit status, wall and CPU seconds, peak RSS and RSS per input byte; then the
largest input the budget allows, extrapolated linearly from the largest size measured (the work is linear in
the input). A run that exceeds --timeout is stopped and shown as such. Wall seconds depend on the machine's
load (printed at the start); CPU seconds less so. With --markdown the summary is also printed as a table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("validate", "plan", "render", "shards", "mig-suggest", "tenant-new", "diff", "diff-base")


def make_stack(dest: Path, mib: float) -> Path:
    shutil.copytree(ROOT / "stacks/dev", dest)
    template = (
        (dest / "tenants/research.yaml").read_text().replace("nvidia.com/gpu.shared: 8", "nvidia.com/gpu.shared: 0")
    )
    size, n = 0, 0
    while size < mib * (1 << 20):
        text = template.replace("name: research", f"name: bulk-{n}")
        (dest / f"tenants/bulk-{n}.yaml").write_text(text)
        size, n = size + len(text), n + 1
    return dest / "spec.yaml"


def _git_commit(repo: Path) -> None:
    git = ["git", "-C", str(repo), "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "bench"], check=True)


def argv_for(command: str, spec: Path, tmp: Path) -> list[str]:
    if command == "diff-base":
        _git_commit(spec.parent)
    return {
        "validate": ["validate", str(spec)],
        "plan": ["plan", str(spec)],
        "render": ["render", str(spec), "--output-dir", str(tmp / "out")],
        "shards": ["shards", str(spec), "--platform-stack", "dev"],
        "mig-suggest": ["mig", "suggest", "--pool", "a100-mig", str(spec)],
        "tenant-new": ["tenant", "new", "bench-new", "--tier", "batch", str(spec)],
        "diff": ["diff", str(ROOT / "stacks/dev/spec.yaml"), str(spec)],
        "diff-base": ["diff", "--base", "HEAD", str(spec)],
    }[command]


# A fresh interpreter per measurement, so that the peak RSS and the CPU time are this run's alone.
_MEASURE = (
    "import resource,subprocess,sys,time\n"
    "m,limit=int(sys.argv[1]),float(sys.argv[2])\n"
    "t=time.perf_counter()\n"
    "p=subprocess.Popen(sys.argv[3:],preexec_fn=lambda:resource.setrlimit(resource.RLIMIT_AS,(m,m)),"
    "stdout=subprocess.DEVNULL,stderr=subprocess.PIPE)\n"
    "rc=None\n"
    "try:\n err=p.communicate(timeout=limit)[1]; rc=p.returncode\n"
    "except subprocess.TimeoutExpired:\n p.kill(); err=p.communicate()[1]\n"
    "u=resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(rc,time.perf_counter()-t,u.ru_utime+u.ru_stime,u.ru_maxrss*1024)\n"
    "sys.stderr.write(err.decode(errors='replace')[-400:])\n"
)


def measure(command: str, mib: float, memory: int, timeout: float) -> tuple[int | None, float, float, int, str]:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        spec = make_stack(tmp / "dev", mib)
        argv = argv_for(command, spec, tmp)
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _MEASURE,
                str(memory),
                str(timeout),
                sys.executable,
                "-m",
                "gpupool",
                *argv,
                "--max-input-size",
                "4Gi",
                "--max-file-size",
                "4Gi",
            ],
            cwd=spec.parent if command == "diff-base" else tmp,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        rc, wall, cpu, rss = proc.stdout.split()
        return (None if rc == "None" else int(rc)), float(wall), float(cpu), int(rss), proc.stderr.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, nargs="+", default=[1, 4])
    ap.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS))
    ap.add_argument("--memory-gb", type=float, default=4)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--timeout", type=float, default=600, help="stop a run after this many seconds")
    ap.add_argument("--markdown", action="store_true", help="also print the summary as a markdown table")
    args = ap.parse_args()
    memory = int(args.memory_gb * (1 << 30))
    from gpupool.spec.input_limits import MAX_FILE_BYTES, MAX_RUN_BYTES, size_text

    print(f"caps: --max-file-size {size_text(MAX_FILE_BYTES)}, --max-input-size {size_text(MAX_RUN_BYTES)}")
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"{'command':<12} {'MiB':>5} {'exit':>4} {'wall s':>7} {'cpu s':>7} {'peak MB':>8} {'B/B':>5}", flush=True)
    rows = []
    for command in args.commands:
        done = []
        for mib in args.mib:
            rc, wall, cpu, rss, err = measure(command, mib, memory, args.timeout)
            size = mib * (1 << 20)
            shown = "stop" if rc is None else str(rc)
            print(
                f"{command:<12} {mib:>5g} {shown:>4} {wall:>7.1f} {cpu:>7.1f} {rss / 1e6:>8.0f} {rss / size:>5.0f}",
                flush=True,
            )
            if rc != 0:
                print(f"  stderr: {err[-300:]}", flush=True)
            done.append((mib, rc, wall, cpu, rss))
        mib, rc, wall, cpu, rss = done[-1]
        size = mib * (1 << 20)
        fit = min(size * memory / rss, size * args.seconds / wall) / (1 << 20)
        print(f"{command:<12} largest within {args.memory_gb:g} GB and {args.seconds:g} s: ~{fit:.1f} MiB", flush=True)
        rows.append((command, done, fit))
    if args.markdown:
        sizes = " | ".join(f"{m:g} MiB: wall s / CPU s / peak MB" for m in args.mib)
        print(f"\n| command | {sizes} | largest within {args.memory_gb:g} GB and {args.seconds:g} s |")
        print("|---|" + "---|" * len(args.mib) + "---|")
        for command, done, fit in rows:
            cells = " | ".join(
                ("stopped" if rc is None else f"{wall:.1f} / {cpu:.1f} / {rss / 1e6:,.0f}")
                + ("" if rc in (0, None) else f" (exit {rc})")
                for _, rc, wall, cpu, rss in done
            )
            print(f"| `{command}` | {cells} | ~{fit:,.1f} MiB |")


if __name__ == "__main__":
    main()
