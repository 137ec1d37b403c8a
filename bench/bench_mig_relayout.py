"""Benchmark: a MIG re-layout of a fleet of named MIG-capable nodes, per node and in total, through the real engine.

    python bench/bench_mig_relayout.py [--nodes 100] [--at-once 10] [--code DIR] [--json FILE]
        [--restart-delay 1.0] [--pending-delay 0.5] [--apply-delay 1.0]

Needs the toolchain (toolchain/build.sh) as the e2e tests do. On a fresh local control plane
(tests/e2e/cluster.py) with NODES nodes in one MIG pool (`rollout.maxUnavailable: AT_ONCE`), gpupool's program
(components.program.main, through tests/e2e/stack.py's E2EStack) makes a first `up`, the nodes are marked as MIG
Manager leaves them (`success`), then the MIG Manager simulator (tests/e2e/mig_manager_sim.py, which follows
mig-parted v0.15.0 and the GPU Operator v26.7.0 as cited there: one pod per node, a start-up run for the label
a pod finds, the operator's DaemonSet roll one pod at a time `--restart-delay` apart when the pod template
changes) starts and the layout changes: the timed `up`.

Printed (and with --json written): the up's wall time; per node the time it was out (cordoned to uncordoned)
and the time it waited before its relabel (cordoned to its new label), each as median and max; the number of
MIG Manager pod starts (a fleet-wide roll restarts every node's pod; gpupool's mig step restarts each rolled
node's pod once); the 1-minute load average at the end.

--code DIR runs another checkout's gpupool and components (e.g. a `git worktree` of the commit before the
mig step, for the "before" figure) with this checkout's simulator; the dynamic providers' host gets DIR on its
PYTHONPATH too. The simulator's delays stand for a real MIG Manager's (pod restart, mig-parted's validation
and apply), scaled down: compare runs with the same delays only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _load_sim():
    """This checkout's simulator, whatever --code puts first on sys.path."""
    spec = importlib.util.spec_from_file_location(
        "mig_manager_sim_bench", REPO / "tests" / "e2e" / "mig_manager_sim.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def spec_text(nodes: list[str], at_once: int, preset: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: gpupool.dev/v1alpha1
        kind: GpuPlatform
        cluster: {{name: bench, gpuOperator: {{namespace: gpu-operator}}}}
        nodePools:
          - name: a100
            gpu: A100-80GB
            gpusPerNode: 2
            nodes: [{", ".join(nodes)}]
            rollout: {{maxUnavailable: {at_once}, nodeTimeoutSeconds: 3600}}
            sharing: {{mig: {{preset: {preset}}}}}
        tiers: [{{name: batch, priority: 1000}}]
        tenants:
          - {{name: team-b, tier: batch, gpus: {{nvidia.com/mig-1g.10gb: 2}}, owners: [team-b]}}
        """)


def measure(args: argparse.Namespace) -> dict:
    from tests.e2e.cluster import ControlPlane, _find_kubectl
    from tests.e2e.stack import E2EStack

    sim_mod = _load_sim()
    bin_dir = Path(os.environ.get("GPUPOOL_TOOLCHAIN_BIN") or _toolchain_bin())
    nodes = [f"mig-{i:03d}" for i in range(1, args.nodes + 1)]
    work = Path(tempfile.mkdtemp(prefix="gpupool-bench-mig-"))
    cp = ControlPlane(bin_dir, kubectl=_find_kubectl()).start()
    try:
        for n in nodes:
            cp.create_gpu_node(n, {"nvidia.com/mig-1g.10gb": "4"})
        (work / "spec.yaml").write_text(spec_text(nodes, args.at_once, "all-balanced"))
        stack = E2EStack(
            bin_dir, cp.kubeconfig, work, spec=work / "spec.yaml", chart=REPO / "tests" / "charts" / "gpu-operator-stub"
        )
        try:
            stack.up()
            for n in nodes:  # MIG Manager, started on the nodes, applied their label
                cp.api(
                    "PATCH",
                    f"/api/v1/nodes/{n}",
                    {"metadata": {"labels": {sim_mod.STATE: "success"}}},
                    content_type="application/merge-patch+json",
                )
            sim = sim_mod.MigManagerSim(
                cp,
                tuple(nodes),
                pending_delay=args.pending_delay,
                apply_delay=args.apply_delay,
                restart_delay=args.restart_delay,
                interval=0.2,
            )
            with sim:
                stack.edit("spec.yaml", "preset: all-balanced", "preset: all-1g.10gb")
                t0 = sim.now()
                start = time.monotonic()
                stack.up()
                total = time.monotonic() - start
                time.sleep(0.5)
            return _figures(sim, nodes, t0, total, args)
        finally:
            stack.close()
    finally:
        cp.stop()


def _figures(sim, nodes: list[str], t0: float, total: float, args: argparse.Namespace) -> dict:
    new = "a100-80gb-all-1g.10gb"
    out, waited = [], []
    for n in nodes:
        cordoned = sim.first(n, "cordoned", t0)
        relabelled = sim.first(n, f"config={new}", t0)
        uncordoned = sim.first(n, "uncordoned", relabelled or t0)
        if None in (cordoned, relabelled, uncordoned):
            raise SystemExit(
                f"node {n} did not go through the re-layout: {[e for e in sim.timeline(t0) if e.node == n]}"
            )
        out.append(uncordoned - cordoned)
        waited.append(relabelled - cordoned)
    starts = sum(1 for e in sim.timeline(t0) if e.what == "sim:started")
    return {
        "code": _describe(args.code),
        "nodes": len(nodes),
        "atOnce": args.at_once,
        "delays": {"restart": args.restart_delay, "pending": args.pending_delay, "apply": args.apply_delay},
        "totalSeconds": round(total, 1),
        "perNodeOutSeconds": {"median": round(statistics.median(out), 1), "max": round(max(out), 1)},
        "perNodeWaitBeforeRelabelSeconds": {
            "median": round(statistics.median(waited), 1),
            "max": round(max(waited), 1),
        },
        "migManagerStarts": starts,
        "allSucceeded": all(sim.gpus[n] == sim.configs()[new] for n in nodes),
        "load1": round(os.getloadavg()[0], 2),
    }


def _describe(code: str | None) -> str:
    where = Path(code) if code else REPO
    p = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(where), "status", "--porcelain", "--", "gpupool", "components"],
        capture_output=True,
        text=True,
    )
    return p.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def _toolchain_bin() -> str:
    p = subprocess.run(
        ["bash", str(REPO / "toolchain" / "build.sh"), "--print-bin-dir"], capture_output=True, text=True
    )
    return p.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--at-once", type=int, default=10, help="rollout.maxUnavailable")
    ap.add_argument("--restart-delay", type=float, default=1.0, help="a MIG Manager pod's replacement, seconds")
    ap.add_argument("--pending-delay", type=float, default=0.5, help="mig-parted's validation, seconds")
    ap.add_argument("--apply-delay", type=float, default=1.0, help="mig-parted's apply, seconds")
    ap.add_argument("--code", help="another checkout whose gpupool and components to run (see the docstring)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    # The dynamic providers' host runs this interpreter (as tests/e2e/conftest.py arranges for the e2e tests).
    os.environ.setdefault("PULUMI_PYTHON_CMD", sys.executable)
    if args.code:
        code = str(Path(args.code).resolve())
        sys.path.insert(0, code)
        os.environ["PYTHONPATH"] = code + os.pathsep + os.environ.get("PYTHONPATH", "")
    sys.path.insert(1 if args.code else 0, str(REPO))
    figures = measure(args)
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
