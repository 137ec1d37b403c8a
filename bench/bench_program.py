"""Time the Pulumi program on a 1,000-tenant spec under mocks, against a bare pulumi_kubernetes script.

Run: PYTHONPATH=. python bench/bench_program.py [--tenants 1000] [--pools 60] [--runs 5] [--keep DIR]

(a) "program": `components.program.main()` with config gpupool:spec=SPEC under the same mocks as
    tests/pulumi_mocks.py (preview=True). Timed from the start of main() until every registration has
    been answered by the mock monitor, so it INCLUDES loading + validating the spec (that is what the
    program does) and building the manifests; the breakdown printed below separates the three.
(b) "bare": a script that registers exactly the same Kubernetes resources with the same inputs through
    pulumi_kubernetes directly, plus the provider and the one helm.v4.Chart -- no components, no
    validation, no manifest building. Its (class, name, kwargs, options) list is precomputed here in the
    parent from `manifests.build` and handed over as a pickle file.

Every sample runs in a fresh subprocess (same interpreter, same imports already paid before the clock
starts: pulumi, pulumi_kubernetes and, for (a), gpupool/components) so Pulumi's global state is equal.
Best of N per side; ratio = best(a) / best(b). Target: <= 1.25x.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # components/ (the Pulumi components) is the checkout's, not an installed package
TARGET = 1.25

# -- the spec ------------------------------------------------------------------------------------

_TIERS = """\
tiers:
  - name: critical
    priority: 1000000
    isolation: dedicated
    description: Revenue-serving inference.
  - name: production
    priority: 100000
    isolation: dedicated
  - name: standard
    priority: 10000
  - name: preemptible
    priority: 100
    preemptionPolicy: Never
    description: Batch and experiments.
"""


def generate_spec(
    directory: Path, tenants: int = 1000, pools: int = 60, nodes_per_pool: int = 4, seed: int = 1
) -> Path:
    """Write DIR/spec.yaml + DIR/tenants/*.yaml: `pools` pools in three kinds (whole H100s, time-sliced
    L4s, MIG A100-80GBs, half of them node lists and half node selectors) and `tenants` tenants whose quotas
    fit the capacity. Returns the spec path."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    tdir = directory / "tenants"
    tdir.mkdir(exist_ok=True)
    for stale in tdir.glob("*.yaml"):
        stale.unlink()
    lines = [
        "apiVersion: gpupool.dev/v1alpha1",
        "kind: GpuPlatform",
        "",
        "cluster:",
        "  name: bench",
        "  gpuOperator:",
        "    chartVersion: v26.7.0",
        "    namespace: gpu-operator",
        "",
        "nodePools:",
    ]
    for i in range(pools):
        kind = i % 3
        name = ("h100", "l4", "a100")[kind] + f"-{i:03d}"
        gpu, per_node = (("H100-80GB", 8), ("L4", 4), ("A100-80GB", 4))[kind]
        lines += [f"  - name: {name}", f"    gpu: {gpu}", f"    gpusPerNode: {per_node}"]
        if (i // 3) % 2:
            lines += [f"    nodeSelector: {{bench.gpupool.dev/group: {name}}}", f"    nodeCount: {nodes_per_pool}"]
        else:
            lines.append("    nodes: [" + ", ".join(f"{name}-n{j}" for j in range(nodes_per_pool)) + "]")
        if kind == 1:
            lines += ["    sharing:", "      timeSlicing:", "        replicas: 4"]
        elif kind == 2:
            lines += ["    sharing:", "      mig:", "        preset: all-balanced"]
    lines += ["", _TIERS, "tenantFiles:", "  - tenants/", ""]
    spec = directory / "spec.yaml"
    spec.write_text("\n".join(lines))

    # Capacity per resource (kinds are round-robin, so each kind has ~pools/3 pools).
    n = {k: len(range(k, pools, 3)) for k in range(3)}
    cap = {
        "nvidia.com/gpu": n[0] * nodes_per_pool * 8,
        "nvidia.com/gpu.shared": n[1] * nodes_per_pool * 4 * 4,
        "nvidia.com/mig-1g.10gb": n[2] * nodes_per_pool * 4 * 2,
        "nvidia.com/mig-2g.20gb": n[2] * nodes_per_pool * 4,
        "nvidia.com/mig-3g.40gb": n[2] * nodes_per_pool * 4,
    }
    left = dict(cap)
    for t in range(tenants):
        kind = t % 4
        tier = (
            ("critical", "production", "standard", "preemptible")[t % 4]
            if kind != 1
            else ("standard", "preemptible")[t % 2]
        )
        wanted = {
            0: {"nvidia.com/gpu": rng.randint(0, 2)},
            1: {"nvidia.com/gpu.shared": rng.randint(1, 4)},
            2: {"nvidia.com/mig-1g.10gb": rng.randint(0, 2), "nvidia.com/mig-3g.40gb": rng.randint(0, 1)},
            3: {"nvidia.com/mig-2g.20gb": rng.randint(0, 1), "nvidia.com/gpu": rng.randint(0, 1)},
        }[kind]
        gpus = {}
        for res, count in wanted.items():
            if not cap[res]:  # fewer than three pools: no pool advertises it, and naming it is an error (GP503)
                continue
            count = min(count, left[res])
            left[res] -= count
            gpus[res] = count
        grants = [f"  {r}: {c}" for r, c in gpus.items()]
        body = [f"name: tenant-{t:04d}", f"tier: {tier}", "gpus:" if grants else "gpus: {}"] + grants
        if t % 3 == 0:
            body.append(f'compute: {{cpu: "{rng.choice([16, 32, 64])}", memory: {rng.choice([64, 128, 256])}Gi}}')
        if t % 5 == 0:
            body += ["containerDefaults:", '  requests: {cpu: "1", memory: 2Gi}', '  limits: {cpu: "4", memory: 8Gi}']
        body.append(f"owners: [team-{t:04d}" + (", platform-admins]" if t % 7 == 0 else "]"))
        body.append(f"costCenter: cc-{1000 + t % 50}")
        if t % 2:
            body.append(f"labels: {{business-unit: bu-{t % 9}}}")
        if t % 97 == 5:
            body.append("offboarded: true")
        (tdir / f"tenant-{t:04d}.yaml").write_text("\n".join(body) + "\n")
    return spec


# -- the children --------------------------------------------------------------------------------

_MOCKS = "from tests.pulumi_mocks import CollectingMocks, RecordingMonitor\n"


def child_program(spec: str, out: str) -> None:
    """(a): the real program, as tests/pulumi_mocks.run_program runs it, with a timed breakdown."""
    import pulumi
    import pulumi_kubernetes  # noqa: F401  (imports are paid before the clock, as in the bare script)

    import components.program as program
    from gpupool.k8s import manifests
    from gpupool.rules import engine  # the program validates through it (components.platform.load_or_stop)
    from tests.pulumi_mocks import CollectingMocks, RecordingMonitor

    mocks = CollectingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpupool", stack="bench", preview=True, monitor=monitor)
    pulumi.runtime.set_all_config({"gpupool:spec": spec})
    marks: dict[str, float] = {}

    real_validate, real_build = engine.validate_file, manifests.build

    def timed_validate(path, **kw):
        t = time.perf_counter()
        try:
            return real_validate(path, **kw)
        finally:
            marks["validate"] = marks.get("validate", 0.0) + time.perf_counter() - t

    def timed_build(*args, **kw):
        t = time.perf_counter()
        try:
            return real_build(*args, **kw)
        finally:
            marks["build"] = marks.get("build", 0.0) + time.perf_counter() - t

    engine.validate_file, manifests.build = timed_validate, timed_build

    @pulumi.runtime.test
    def run():
        marks["start"] = time.perf_counter()
        program.main()

    run()  # returns once every outstanding registration has completed
    end = time.perf_counter()
    total = end - marks["start"]
    k8s = sum(1 for a in mocks.created if a.typ.startswith("kubernetes:") and a.custom)
    provider = sum(1 for a in mocks.created if a.typ.startswith("pulumi:providers:"))
    components = sum(1 for a in mocks.created if not a.custom and a.typ.startswith("gpupool:"))
    chart = sum(1 for a in mocks.created if a.typ == "kubernetes:helm.sh/v4:Chart")
    Path(out).write_text(
        json.dumps(
            {
                "total": total,
                "validate": marks.get("validate", 0.0),
                "build": marks.get("build", 0.0),
                "registered": len(mocks.created),
                "kubernetes": k8s - chart,
                "provider": provider,
                "chart": chart,
                "components": components,
            }
        )
    )


def child_bare(plan_file: str, out: str) -> None:
    """(b): the same Kubernetes resources, inputs and options, straight through pulumi_kubernetes."""
    import pulumi
    import pulumi_kubernetes as k8s

    from components.provider import settings as provider_settings
    from tests.pulumi_mocks import CollectingMocks, RecordingMonitor

    with open(plan_file, "rb") as f:
        rows = pickle.load(f)  # loaded before the clock: this is the "same inputs", not work to measure
    from components.k8s_objects import _CLASSES

    classes = {cls.__name__: cls for cls in _CLASSES.values()}  # the pulumi_kubernetes classes themselves
    mocks = CollectingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="gpupool", stack="bench", preview=True, monitor=monitor)
    marks: dict[str, float] = {}

    @pulumi.runtime.test
    def run():
        marks["start"] = time.perf_counter()
        provider = k8s.Provider("k8s", **provider_settings())  # the program's own settings
        resources: dict[str, pulumi.Resource] = {}
        for kind, name, kwargs, deps, retain in rows:
            # (a node patch's MIG rollout step is a dynamic resource of the program's, not a Kubernetes one)
            after = [resources[d] for d in deps if d in resources]
            opts = pulumi.ResourceOptions(provider=provider, depends_on=after, retain_on_delete=retain)
            if kind == "Chart":
                repo = kwargs.pop("repository_opts", None)
                resources[name] = k8s.helm.v4.Chart(
                    name,
                    repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=repo) if repo else None,
                    opts=opts,
                    **kwargs,
                )
            else:
                resources[name] = classes[kind](name, opts=opts, **kwargs)

    run()
    end = time.perf_counter()
    chart = sum(1 for a in mocks.created if a.typ == "kubernetes:helm.sh/v4:Chart")
    Path(out).write_text(
        json.dumps(
            {
                "total": end - marks["start"],
                "registered": len(mocks.created),
                "kubernetes": sum(1 for a in mocks.created if a.typ.startswith("kubernetes:") and a.custom) - chart,
                "provider": sum(1 for a in mocks.created if a.typ.startswith("pulumi:providers:")),
                "chart": chart,
                "components": 0,
            }
        )
    )


# -- the parent ----------------------------------------------------------------------------------


def bare_rows(spec_path: Path) -> list[tuple]:
    """(kind, name, kwargs, depends_on, retain_on_delete) per resource, in the program's registration order."""
    from components.k8s_objects import _CLASSES, _snake, pulumi_inputs
    from gpupool.k8s import manifests
    from gpupool.rules.engine import load_valid_spec

    plan = manifests.build(load_valid_spec(spec_path))
    # The program registers the operator's chart after the two ConfigMaps it depends on.
    chart = plan.chart
    at = max(i for i, o in enumerate(plan.objects) if o.name in chart.depends_on) + 1
    objects = plan.objects[:at] + [chart] + plan.objects[at:]
    rows = []
    for obj in objects:
        deps = tuple(d for d in obj.depends_on)
        if obj is chart:
            kwargs = {
                "chart": chart.chart,
                "version": chart.version,
                "repository_opts": chart.repository,
                "namespace": chart.namespace,
                "values": chart.values,
            }
            rows.append(("Chart", chart.name, kwargs, deps, None))
            continue
        cls = _CLASSES[(obj.manifest["apiVersion"], obj.manifest["kind"], obj.patch)]
        kwargs = {_snake(k): v for k, v in pulumi_inputs(obj).items() if k not in ("apiVersion", "kind")}
        rows.append((cls.__name__, obj.name, kwargs, deps, obj.retain_on_delete or None))
    return rows


def sample(mode: str, arg: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        subprocess.run([sys.executable, __file__, "--child", mode, arg, out], check=True, cwd=ROOT, env=env)
        return json.loads(Path(out).read_text())
    finally:
        os.unlink(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--pools", type=int, default=60)
    ap.add_argument("--runs", type=int, default=5, help="samples per side (best of N); at least 3")
    ap.add_argument("--keep", metavar="DIR", help="write the generated spec here and keep it")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, arg, out = args.child
        (child_program if mode == "program" else child_bare)(arg, out)
        return

    tmp = tempfile.TemporaryDirectory(prefix="gpupool-bench-")
    directory = Path(args.keep) if args.keep else Path(tmp.name)
    spec = generate_spec(directory, tenants=args.tenants, pools=args.pools)
    from gpupool.rules.engine import validate_file

    result = validate_file(spec)
    if result.spec is None:
        for d in result.report.sorted():
            print(d.render(), file=sys.stderr)
        sys.exit("generated spec is invalid")
    rows = bare_rows(spec)
    plan_file = directory / "bare-plan.pickle"
    plan_file.write_bytes(pickle.dumps(rows))

    runs = max(3, args.runs)
    program, bare = [], []
    for _ in range(runs):  # interleaved, so drift in machine load hits both sides alike
        program.append(sample("program", str(spec)))
        bare.append(sample("bare", str(plan_file)))
    a = min(program, key=lambda r: r["total"])
    b = min(bare, key=lambda r: r["total"])
    reg = a["total"] - a["validate"] - a["build"]
    print(f"spec: {spec} ({args.tenants} tenants, {args.pools} pools); best of {runs}, fresh process each")
    print(
        f"registered  program: {a['registered']} = {a['kubernetes']} kubernetes + {a['chart']} chart + "
        f"{a['provider']} provider + {a['components']} components (+1 stack)"
    )
    print(
        f"            bare:    {b['registered']} = {b['kubernetes']} kubernetes + {b['chart']} chart + "
        f"{b['provider']} provider (+1 stack)"
    )
    print(
        f"(a) program  {a['total'] * 1000:8.1f} ms   = load+validate {a['validate'] * 1000:.1f} ms"
        f" + build manifests {a['build'] * 1000:.1f} ms + registration {reg * 1000:.1f} ms"
    )
    print(f"(b) bare     {b['total'] * 1000:8.1f} ms")
    print(
        "    all samples (ms): program "
        + ", ".join(f"{r['total'] * 1000:.0f}" for r in program)
        + " | bare "
        + ", ".join(f"{r['total'] * 1000:.0f}" for r in bare)
    )
    ratio = a["total"] / b["total"]
    print(f"ratio a/b = {ratio:.2f}x (target <= {TARGET}x): {'OK' if ratio <= TARGET else 'ABOVE TARGET'}")
    print(f"ratio registration-only / bare = {reg / b['total']:.2f}x (without load+validate and build)")
    tmp.cleanup()


if __name__ == "__main__":
    main()
