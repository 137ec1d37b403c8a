"""How large an input each command handles within a memory and time budget (default 4 GB, 60 s), at the
input caps (issue 21: every input read is bounded).

Run: PYTHONPATH=. python bench/bench_input_limits.py [--mib 2 8] [--commands validate plan render diff]
                                                    [--memory-gb 4] [--seconds 60]

For each size, the dev stack gets that many MiB of extra tenant files (copies of one tenant with a zero
quota, so the stack stays valid and every command does its full work), and each command runs in a child
process under `ulimit -v` (RLIMIT_AS) of the memory budget, measured with getrusage (peak RSS) and the wall
clock. Printed per command and size: wall seconds, peak RSS, RSS per input byte; then the largest input the
budget allows, extrapolated linearly from the largest size measured (loading is linear in the input), next to
the caps (--max-file-size, --max-input-size). Numbers depend on the machine: compare ratios, not seconds.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, nargs="+", default=[2, 8])
    ap.add_argument("--commands", nargs="+", default=["validate", "plan", "render", "diff"])
    ap.add_argument("--memory-gb", type=float, default=4)
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args()
    memory = int(args.memory_gb * (1 << 30))
    from gpupool.spec.loader import MAX_FILE_BYTES, MAX_RUN_BYTES

    print(f"caps: --max-file-size {MAX_FILE_BYTES >> 20} MiB, --max-input-size {MAX_RUN_BYTES >> 20} MiB")
    print(f"{'command':<9} {'MiB':>5} {'exit':>4} {'wall s':>7} {'peak MB':>8} {'B/B':>5}")
    for command in args.commands:
        last = None
        for mib in args.mib:
            with tempfile.TemporaryDirectory() as tmp:
                spec = make_stack(Path(tmp) / "dev", mib)
                argv = {
                    "validate": ["validate", str(spec)],
                    "plan": ["plan", str(spec)],
                    "render": ["render", str(spec), "--output-dir", str(Path(tmp) / "out")],
                    "diff": ["diff", str(ROOT / "stacks/dev/spec.yaml"), str(spec)],
                }[command]
                # a fresh interpreter per measurement, so that the peak RSS is this run's alone
                code = (
                    "import resource,subprocess,sys,time,os;"
                    "t=time.perf_counter();"
                    f"m={memory};"
                    "p=subprocess.run(sys.argv[1:],preexec_fn=lambda:resource.setrlimit(resource.RLIMIT_AS,(m,m)),capture_output=True);"
                    "print(p.returncode,time.perf_counter()-t,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024)"
                )
                out = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        code,
                        sys.executable,
                        "-m",
                        "gpupool",
                        *argv,
                        "--max-input-size",
                        "4Gi",
                        "--max-file-size",
                        "4Gi",
                    ],
                    cwd=tmp,
                    capture_output=True,
                    text=True,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                ).stdout.split()
                rc, wall, rss = int(out[0]), float(out[1]), int(out[2])
                size = mib * (1 << 20)
                print(f"{command:<9} {mib:>5g} {rc:>4} {wall:>7.1f} {rss / 1e6:>8.0f} {rss / size:>5.0f}")
                last = (size, wall, rss)
        if last:
            size, wall, rss = last
            fit = min(size * memory / rss, size * args.seconds / wall)
            print(
                f"{command:<9} largest within {args.memory_gb:g} GB and {args.seconds:g} s: ~{fit / (1 << 20):.0f} MiB"
            )


if __name__ == "__main__":
    main()
