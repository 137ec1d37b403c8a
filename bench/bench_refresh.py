"""Benchmark: what `gpupool stacks up`'s refresh costs (issue 41 item 4).

    python bench/bench_refresh.py [--tenants 100] [--pools 10] [--per-shard 0]

`gpupool stacks up` runs `pulumi refresh`, `pulumi up` and then the convergence check (`pulumi preview
--expect-no-changes`); `--no-refresh` skips the refresh, and the check then compares with the state only. This deploys bench/bench_validate.py's generated spec of N
tenants through `gpupool stacks up --no-refresh` (untimed) in a copy of this project (tests/e2e/cli.py's
CliProject: the locally built pulumi CLI and kubernetes provider, the project's virtualenv, a file backend,
the stub operator chart, skipAwait) on a fresh local control plane (bench/bench_e2e.py's), then times on
the unchanged platform, one run each, whole commands as a user runs them:

    gpupool stacks preview dev              no refresh
    gpupool stacks preview dev --refresh    CI's pull-request preview
    gpupool stacks up dev --no-refresh      up, then the unrefreshed convergence check
    gpupool stacks up dev                   the default: up --refresh, then preview --refresh

and prints each with the resources of the stack(s) and the 1-minute load average when it ended (the machine
may be shared: compare lines of similar load). With --per-shard S the spec is sharded (ceil(N/S) tenant
shard stacks and the platform stack; gpupool stacks runs them all).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from bench_e2e import fresh_control_plane, gpupool, node_resources, settle, toolchain_bin_dir  # noqa: E402
from bench_validate import generate  # noqa: E402

RUNS = (
    ("preview", ()),
    ("preview", ("--refresh",)),
    ("up", ("--no-refresh",)),
    ("up", ()),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tenants", type=int, default=100)
    ap.add_argument("--pools", type=int, default=10)
    ap.add_argument("--per-shard", type=int, default=0, help="shard the spec, S tenants per shard (0: one stack)")
    args = ap.parse_args()
    from tests.e2e.cli import CliProject

    bin_dir = toolchain_bin_dir()
    doc = generate(args.tenants, args.pools)
    if args.per_shard:
        doc["sharding"] = {"tenantShards": math.ceil(args.tenants / args.per_shard)}
    root = Path(tempfile.mkdtemp(prefix="gpupool-bench-refresh-"))
    cp = fresh_control_plane(bin_dir, node_resources(doc))
    try:
        project = CliProject(bin_dir, cp.kubeconfig, root, spec="bench-spec.yaml")
        (project.dir / "bench-spec.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=120))
        gpupool("validate", "-q", str(project.dir / "bench-spec.yaml"))

        def run(op: str, flags: tuple[str, ...]) -> tuple[float, str]:
            argv = [*project._argv(op), *flags]
            t0 = time.perf_counter()
            p = subprocess.run(argv, cwd=project.dir, env=project.env, text=True, capture_output=True, timeout=7200)
            took = time.perf_counter() - t0
            if p.returncode != 0:
                raise SystemExit(f"{' '.join(argv[1:4])} {' '.join(flags)} failed:\n{(p.stdout + p.stderr)[-4000:]}")
            return took, p.stdout

        took, _ = run("up", ("--no-refresh",))
        print(f"[{args.tenants} tenants] deployed in {took:.0f} s (untimed)", flush=True)
        settle(cp)
        for op, flags in RUNS:
            took, out = run(op, flags)
            summary = " / ".join(ln for ln in out.strip().splitlines() if re.match(r"^dev\S*: ", ln))
            shown = f"gpupool stacks {op} dev {' '.join(flags)}".strip()
            print(f"[{args.tenants} tenants] {shown:42s} {took:8.1f} s  load {os.getloadavg()[0]:.1f}", flush=True)
            print(f"    {summary[:300]}", flush=True)
    finally:
        cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
