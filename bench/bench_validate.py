"""Benchmark: `gpupool validate` on a 1,000-tenant, 100-pool spec vs just loading it with PyYAML's C loader.

Two layouts: one file holding everything, and the layout users have, the spec plus one file per tenant in a
tenant directory (`tenantFiles: [tenants/]`), where the baseline loads the spec and every tenant file with
the C loader in one interpreter. Every command runs in a fresh interpreter (subprocess), alternately, best
of N repeats of its CPU time (user + system: robust on a shared machine); each ratio is measured in one run, so machine speed cancels out. Target: validate <= 2x the bare
C-loader parse, in both layouts.

    python bench/bench_validate.py [--repeats 5] [--tenants 1000] [--pools 100] [--keep DIR]

The script also checks that validation succeeded (exit 0) and that Pulumi was never imported.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
TARGET = 2.0

# (gpu model, gpus per node, sharing block, advertised resource -> units per node)
POOL_KINDS = [
    ("exclusive", "H100-80GB", 8, None, {"nvidia.com/gpu": 8}),
    (
        "mig",
        "A100-80GB",
        8,
        {"mig": {"preset": "all-balanced"}},
        {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8},
    ),
    (
        "mig",
        "H100-80GB",
        8,
        {
            "mig": {
                "perGpu": [
                    {"gpus": [0, 1, 2, 3], "layout": {"3g.40gb": 2}},
                    {"gpus": [4, 5, 6, 7], "preset": "all-1g.10gb"},
                ]
            }
        },
        {"nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-1g.10gb": 28},
    ),
    ("time-sliced", "L4", 4, {"timeSlicing": {"replicas": 4}}, {"nvidia.com/gpu.shared": 16}),
    (
        "mig+ts",
        "A100-40GB",
        8,
        {"mig": {"preset": "all-balanced"}, "timeSlicing": {"replicas": 2}},
        {"nvidia.com/mig-1g.5gb.shared": 32, "nvidia.com/mig-2g.10gb.shared": 16, "nvidia.com/mig-3g.20gb.shared": 16},
    ),
]
SHARED = {
    "nvidia.com/gpu.shared",
    "nvidia.com/mig-1g.5gb.shared",
    "nvidia.com/mig-2g.10gb.shared",
    "nvidia.com/mig-3g.20gb.shared",
}


def generate(n_tenants: int, n_pools: int, nodes_per_pool: int = 4) -> dict:
    """A valid spec of N_TENANTS tenants over N_POOLS pools of the POOL_KINDS in turn, NODES_PER_POOL nodes each
    (the end-to-end fault tests take 1: each MIG-capable node is seven resources of its rollout, which would
    outweigh the tenants they kill runs among)."""
    pools, capacity = [], {}
    for i in range(n_pools):
        kind, gpu, per_node, sharing, res = POOL_KINDS[i % len(POOL_KINDS)]
        nodes = [f"{kind.replace('+', '-')}-{i:03d}-{k}" for k in range(nodes_per_pool)]
        pool = {
            "name": f"pool-{i:03d}-{kind.replace('+', '-')}",
            "gpu": gpu,
            "gpusPerNode": per_node,
            "nodes": nodes,
            "pricePerGpuHour": 2.5,
        }
        if sharing:
            pool["sharing"] = sharing
        pools.append(pool)
        for name, units in res.items():
            capacity[name] = capacity.get(name, 0) + units * len(nodes)
    tiers = [
        {"name": "production", "priority": 100000, "isolation": "dedicated"},
        {"name": "standard", "priority": 10000},
        {"name": "batch", "priority": 1000, "preemptionPolicy": "Never"},
    ]
    left = dict(capacity)
    tenants = []
    resources = sorted(capacity)
    for t in range(n_tenants):
        tier = tiers[t % 3]["name"]
        allowed = [r for r in resources if not (tier == "production" and r in SHARED)]
        gpus = {}
        for k in range(3):
            r = allowed[(t * 7 + k * 3) % len(allowed)]
            want = 1 + (t + k) % 3
            if left[r] >= want:
                gpus[r] = gpus.get(r, 0) + want
                left[r] -= want
        tenant = {
            "name": f"team-{t:04d}",
            "tier": tier,
            "gpus": gpus,
            "compute": {"cpu": str(16 + t % 48), "memory": f"{64 + t % 192}Gi"},
            "containerDefaults": {
                "requests": {"cpu": "500m", "memory": "1Gi"},
                "limits": {"cpu": "2", "memory": "4Gi"},
            },
            "owners": [f"team-{t:04d}-admins"],
            "costCenter": f"cc-{1000 + t}",
            "labels": {"business-unit": f"bu-{t % 12}"},
        }
        if t % 97 == 0:
            tenant["offboarded"] = True
        tenants.append(tenant)
    return {
        "apiVersion": "gpupool.dev/v1alpha1",
        "kind": "GpuPlatform",
        "cluster": {"name": "bench", "gpuOperator": {"chartVersion": "v26.7.0"}},
        "oversubscription": {"maxRatio": 1.0, "perResource": {"nvidia.com/gpu.shared": 1.5}},
        "nodePools": pools,
        "tiers": tiers,
        "tenants": tenants,
    }


def run(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """(CPU seconds the child used, user + system; the process). CPU time, not wall time: on a shared
    machine other work stretches wall time by whatever it takes, CPU time barely moves."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc


def best_pair(a: list[str], b: list[str], repeats: int) -> tuple[float, float]:
    """Best of REPEATS for each command, run alternately so both see the same machine."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for cmd, out in ((a, times[0]), (b, times[1])):
            elapsed, proc = run(cmd)
            if proc.returncode != 0:
                sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
            out.append(elapsed)
    return min(times[0]), min(times[1])


def write_single(out_dir: Path, spec: dict) -> Path:
    path = out_dir / "bench-spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, width=120))
    return path


def write_tenant_dir(out_dir: Path, spec: dict) -> Path:
    """The spec without tenants, plus tenants/<name>.yaml per tenant."""
    root = out_dir / "tenant-dir"
    tenants = root / "tenants"
    tenants.mkdir(parents=True, exist_ok=True)
    for tenant in spec["tenants"]:
        (tenants / f"{tenant['name']}.yaml").write_text(yaml.safe_dump(tenant, sort_keys=False, width=120))
    head = {k: v for k, v in spec.items() if k != "tenants"}
    head["tenantFiles"] = ["tenants/"]
    path = root / "spec.yaml"
    path.write_text(yaml.safe_dump(head, sort_keys=False, width=120))
    return path


# The bare baseline for the tenant directory: the spec and every tenant file, C loader, one interpreter.
LOAD_DIR = (
    "import yaml,sys,os; d=os.path.join(os.path.dirname(sys.argv[1]),'tenants'); "
    "yaml.load(open(sys.argv[1]), Loader=yaml.CSafeLoader); "
    "[yaml.load(open(os.path.join(d,f)), Loader=yaml.CSafeLoader) for f in sorted(os.listdir(d))]"
)
LOAD_ONE = "import yaml,sys; yaml.load(open(sys.argv[1]), Loader=yaml.CSafeLoader)"


def measure(spec: Path, load_code: str, repeats: int) -> tuple[float, float]:
    validate = [sys.executable, "-m", "gpupool", "validate", "-q", str(spec)]
    # Correctness first: validate must pass, and must not import Pulumi.
    _, proc = run([sys.executable, "-X", "importtime", *validate[1:]])
    if proc.returncode != 0:
        sys.exit(f"gpupool validate failed on {spec}:\n{proc.stderr[-3000:]}")
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    pulumi = sorted(m for m in imported if m == "pulumi" or m.startswith("pulumi."))
    assert not pulumi, f"gpupool validate imported Pulumi: {pulumi[:5]}"
    return best_pair(validate, [sys.executable, "-c", load_code, str(spec)], repeats)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--pools", type=int, default=100)
    ap.add_argument("--keep", metavar="DIR", help="write the specs here instead of a temporary directory")
    args = ap.parse_args()

    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(args.keep or tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        data = generate(args.tenants, args.pools)
        layouts = [
            ("one file", write_single(out_dir, data), LOAD_ONE),
            (f"spec + {args.tenants} tenant files", write_tenant_dir(out_dir, data), LOAD_DIR),
        ]
        print(
            f"spec: {args.tenants} tenants, {args.pools} pools; CPU time (user+sys), best of {args.repeats}, "
            "fresh interpreters"
        )
        for name, spec, load_code in layouts:
            t_validate, t_load = measure(spec, load_code, args.repeats)
            ratio = t_validate / t_load
            ok = ok and ratio <= TARGET
            print(
                f"{name:>28}: yaml.load (CSafeLoader) {t_load * 1000:7.1f} ms, gpupool validate "
                f"{t_validate * 1000:7.1f} ms, ratio {ratio:.2f}x (target <= {TARGET:g}x: "
                f"{'ok' if ratio <= TARGET else 'OVER'})"
            )
    print("pulumi imported by validate: no")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
