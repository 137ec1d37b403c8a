"""Probe: how the Pulumi SDK's final wait (pulumi/runtime/stack.py ``wait_for_rpcs``) spends the program's CPU.

    python bench/probe_sdk_wait.py [--tenants 100] [--sides base,fix]

(needs the toolchain, like bench/bench_e2e.py; about 1 minute per side at 100 tenants on 2 cores)

For each side, one ``pulumi up`` from empty and one ``pulumi preview`` of gpupool's real program through the
Automation API (tests/e2e/stack.py's E2EStack, PULUMI_SKIP_CHECKPOINTS=true so the engine answers quickly and
the program's share shows), each on a fresh local control plane. It prints how many registration RPCs were
in flight when the SDK started its final wait, and how often that wait then called ``asyncio.wait`` over
how many pending Outputs in all (the quadratic part), plus this process's CPU time.

* ``fix``:  components.program as it is (``wait_for_registrations_linearly``: every registration in flight).
* ``base``: the same with that hook replaced by a no-op (what a plain synchronous program does).
Not a benchmark with a ratio; it explains the program CPU that bench_e2e.py's CPU split reports.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import types
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_e2e import STUB_CHART, fresh_control_plane, node_resources, toolchain_bin_dir  # noqa: E402
from bench_validate import generate  # noqa: E402
from pulumi.runtime import stack as sdk_stack  # noqa: E402

import components.program as program  # noqa: E402
from tests.e2e.stack import E2EStack  # noqa: E402

STATS: dict[str, int] = {}


def instrument() -> None:
    real_wait_for_rpcs, real_wait = sdk_stack.wait_for_rpcs, asyncio.wait

    async def wait_for_rpcs(*args, **kwargs):
        STATS["in flight"] = len(sdk_stack._get_rpc_manager().rpcs)
        return await real_wait_for_rpcs(*args, **kwargs)

    async def counting_wait(tasks, **kwargs):
        STATS["asyncio.wait calls"] = STATS.get("asyncio.wait calls", 0) + 1
        STATS["pending outputs passed"] = STATS.get("pending outputs passed", 0) + len(tasks)
        return await real_wait(tasks, **kwargs)

    sdk_stack.wait_for_rpcs = wait_for_rpcs
    # Only the SDK's stack module sees the counting asyncio.wait.
    proxy = types.ModuleType("asyncio")
    proxy.__dict__.update(asyncio.__dict__)
    proxy.wait = counting_wait  # type: ignore[attr-defined]
    sdk_stack.asyncio = proxy  # type: ignore[attr-defined]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", type=int, default=100)
    ap.add_argument("--sides", default="base,fix")
    args = ap.parse_args()
    bin_dir = toolchain_bin_dir()
    work = Path(tempfile.mkdtemp(prefix="gpupool-probe-"))
    doc = generate(args.tenants, 10)
    spec = work / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    instrument()
    hook = program.wait_for_registrations_linearly
    for side in args.sides.split(","):
        program.wait_for_registrations_linearly = hook if side == "fix" else (lambda: None)  # type: ignore[assignment]
        cp = fresh_control_plane(bin_dir, node_resources(doc))
        try:
            stack = E2EStack(bin_dir, cp.kubeconfig, work, spec=spec, chart=STUB_CHART)
            stack.stack.workspace.env_vars["PULUMI_SKIP_CHECKPOINTS"] = "true"
            for op in ("up", "preview"):
                STATS.clear()
                t0, c0 = time.perf_counter(), time.process_time()
                getattr(stack.stack, op)(on_output=lambda _: None, color="never")
                print(
                    f"{args.tenants} tenants [{side}] {op}: {time.perf_counter() - t0:.1f} s wall, "
                    f"{time.process_time() - c0:.1f} s CPU of this process, {STATS}",
                    flush=True,
                )
            stack.close()
        finally:
            cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
